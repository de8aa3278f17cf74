"""File backends for the LangChain adapter.

* :class:`DeepAgentsFileBackend` adapts a deepagents ``BackendProtocol`` (the
  backend behind the agent's own ``ls``/``read_file`` tools) to the core
  :class:`~ars_core.FileBackend`: ARS's virtual ``outputs/...`` paths become
  ``/outputs/...`` there, exactly what ``read_file("outputs/...")`` opens, or
  ``/threads/<scope>/outputs/...`` when the backend is shared by threads.
* :class:`BackendResolver` picks the backend of one model call: the runtime
  context's ``file_backend`` (or ``ars_backend``) when set, else the
  middleware's own, else the agent's own (the backend of deepagents' file
  tools), else the graph's store (``runtime.store``, through
  :class:`~ars_langchain.store.StoreFileBackend`), else
  :func:`ars_core.default_backend` (the folder ``.ars``, or ``ARS_FILES_DIR``).
  Every backend is scoped to the
  conversation thread (cached per thread); sub-agents run with their parent's
  ``thread_id``, so they share the parent's scope.

Thread scopes in a deepagents backend: a backend that already keeps
files per thread (``StateBackend``, or a ``CompositeBackend`` routing
``/outputs/`` to one) gets ARS's files at ``/outputs/...``. A backend shared by
every thread gets them under ``/threads/<scope>/outputs/...`` - for a
``FilesystemBackend`` that is ``<root_dir>/threads/<scope>/outputs/...`` on
disk, written atomically by ARS, whatever its ``virtual_mode`` - and the
middleware points the agent's ``read_file``/``ls``/``glob``/``grep`` calls on
ARS's own folders (``/outputs/large_tool_results``, ...) at the thread's scope
(:meth:`BackendResolver.agent_path`), so the path in a preview always opens
and another thread's files never appear there.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ars_core import FileBackend, FileBackendError, FsspecBackend, check_path, default_backend
from ars_core.adapter import (
    DEFAULT_READ_ONLY,
    OUTPUT_FOLDERS,
    decode_text,
    encode_text,
    output_folder,
    scope_name,
)

from .isolation import ThreadIsolatedBackend
from .store import StoreFileBackend

__all__ = [
    "ARS_FOLDERS",
    "READ_TOOL_ARGS",
    "BackendResolver",
    "DeepAgentsFileBackend",
    "agent_backend",
    "is_deepagents_backend",
    "isolate_threads",
    "tool_owner",
]

#: the folders ARS writes (virtual, without a leading slash): all of :mod:`ars_core.layout`'s
ARS_FOLDERS: tuple[str, ...] = OUTPUT_FOLDERS
#: deepagents' file tools that read, and the argument naming their path
READ_TOOL_ARGS = {"read_file": "file_path", "ls": "path", "glob": "path", "grep": "path"}
_ISOLATE_LOCK = threading.Lock()


def is_deepagents_backend(obj: Any) -> bool:
    """Whether ``obj`` is a deepagents ``BackendProtocol`` (deepagents need not be installed)."""
    try:
        from deepagents.backends.protocol import BackendProtocol
    except ImportError:  # pragma: no cover - deepagents is part of the langchain extra
        return False
    return isinstance(obj, BackendProtocol)


def tool_owner(tool: Any) -> Any:
    """The deepagents ``FilesystemMiddleware`` that built ``tool`` (one of its
    file tools, closures over it), or ``None``."""
    for fn in (getattr(tool, "func", None), getattr(tool, "coroutine", None)):
        if fn is None or not inspect.isfunction(fn):
            continue
        try:
            owner = inspect.getclosurevars(fn).nonlocals.get("self")
        except (TypeError, ValueError):
            continue
        backend = getattr(owner, "backend", None)
        if backend is not None and is_deepagents_backend(backend):
            return owner
    return None


def agent_backend(tools: Iterable[Any]) -> Any:
    """The deepagents backend behind the agent's own file tools, or ``None``.

    deepagents' ``FilesystemMiddleware`` builds ``read_file`` and friends as
    closures over itself; its ``backend`` is what those tools read (the shared
    backend itself when ARS put a :class:`ThreadIsolatedBackend` in front of it).
    """
    for tool in tools:
        if getattr(tool, "name", None) not in READ_TOOL_ARGS:
            continue
        owner = tool_owner(tool)
        if owner is not None:
            backend = owner.backend
            return backend.inner if isinstance(backend, ThreadIsolatedBackend) else backend
    return None


def isolate_threads(owner: Any) -> None:
    """Put a :class:`ThreadIsolatedBackend` in front of ``owner``'s backend (a
    deepagents ``FilesystemMiddleware``) when every thread shares it; once."""
    backend = owner.backend
    if isinstance(backend, ThreadIsolatedBackend) or _keeps_threads_apart(backend):
        return
    if callable(getattr(backend, "execute", None)):
        return  # a sandbox: its shell reaches every folder anyway; its tools stay as they are
    dirs = ["/threads"]
    local = _filesystem_root(backend)
    if local is not None:
        dirs.append(local[0].as_posix().rstrip("/") + "/threads")
    with _ISOLATE_LOCK:
        if owner.backend is backend:
            owner.backend = ThreadIsolatedBackend(backend, dirs)


def _keeps_threads_apart(backend: Any) -> bool:
    """Whether a deepagents backend already keeps ARS's ``/outputs/`` per thread."""
    try:
        from deepagents.backends import CompositeBackend, StateBackend
    except ImportError:  # pragma: no cover
        return False
    if isinstance(backend, StateBackend):
        return True  # files live in the thread's checkpointed state
    if isinstance(backend, CompositeBackend):
        for prefix, routed in sorted(backend.routes.items(), key=lambda r: -len(r[0])):
            if "/outputs/x".startswith(prefix.rstrip("/") + "/"):
                return _keeps_threads_apart(routed)
        return _keeps_threads_apart(backend.default)
    return False


def _filesystem_root(backend: Any) -> tuple[Path, bool] | None:
    """``(root_dir, virtual_mode)`` of a deepagents ``FilesystemBackend``."""
    try:
        from deepagents.backends import FilesystemBackend
    except ImportError:  # pragma: no cover
        return None
    if isinstance(backend, FilesystemBackend):
        return Path(backend.cwd), bool(backend.virtual_mode)
    return None


class _AgentView:
    """A core backend plus where the agent's own file tools find its files."""

    def __init__(self, inner: FileBackend, agent_prefix: str) -> None:
        self.inner = inner
        self.agent_prefix = agent_prefix

    def agent_path(self, path: str) -> str:
        """The path the agent's ``read_file`` opens for ARS's virtual ``path``."""
        return self.agent_prefix + check_path(path)

    def write_text(self, path: str, text: str) -> str:
        return self.inner.write_text(path, text)

    def write_bytes(self, path: str, data: bytes) -> str:
        """Encoded text (a history archive) goes to the inner backend as it is
        when that takes bytes."""
        write_bytes = getattr(self.inner, "write_bytes", None)
        if write_bytes is None:
            return self.inner.write_text(path, decode_text(data))
        written: str = write_bytes(path, data)
        return written

    async def awrite_text(self, path: str, text: str) -> str:
        awrite = getattr(self.inner, "awrite_text", None)
        if awrite is None:
            import anyio

            written: str = await anyio.to_thread.run_sync(self.inner.write_text, path, text)
            return written
        done: str = await awrite(path, text)
        return done

    async def awrite_bytes(self, path: str, data: bytes) -> str:
        """:meth:`write_bytes` without blocking the loop."""
        if getattr(self.inner, "awrite_text", None) is not None:
            return await self.awrite_text(path, decode_text(data))
        import anyio

        written: str = await anyio.to_thread.run_sync(self.write_bytes, path, data)
        return written

    def read_text(self, path: str) -> str:
        return self.inner.read_text(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def __repr__(self) -> str:
        return f"_AgentView({self.inner!r}, agent_prefix={self.agent_prefix!r})"


class DeepAgentsFileBackend:
    """A core file backend over a deepagents ``BackendProtocol``.

    Paths are checked with :func:`ars_core.check_path` and mapped to
    ``<prefix>/<path>``: ``prefix`` is empty for a backend that keeps threads
    apart, ``/threads/<scope>`` for a shared one (see the module doc). A file
    that already holds the text is not written again; writes overwrite
    (``upload_files``, falling back to ``write``). A ``StateBackend`` must be used
    inside the graph run, which is where the middleware calls it.
    """

    def __init__(
        self,
        backend: Any,
        *,
        scope: str | None = None,
        read_only: tuple[str, ...] = DEFAULT_READ_ONLY,
    ) -> None:
        self.backend = backend
        self.scope = scope
        self.prefix = f"/threads/{scope_name(scope)}" if scope is not None else ""
        self.read_only = read_only

    @property
    def writes_follow_state(self) -> bool:
        """Whether the files live in the agent's state (a ``StateBackend``, or a
        ``CompositeBackend`` whose default is one): a write then belongs to the step
        that made it and is dropped if that step fails, so the engine does not take
        a file as written because it wrote it once."""
        backend = self.backend
        default = getattr(backend, "default", None)
        return any(type(b).__name__ == "StateBackend" for b in (backend, default))

    def host_path(self, path: str) -> str:
        """Where the virtual ``path`` lives in the deepagents backend."""
        return f"{self.prefix}/{path}"

    def agent_path(self, path: str) -> str:
        """The path the agent's ``read_file`` opens for ARS's virtual ``path``."""
        return self.host_path(check_path(path))

    def _error(self, norm: str, exc: Exception) -> FileBackendError:
        return FileBackendError(norm, f"{type(exc).__name__}: {exc}")

    def write_text(self, path: str, text: str) -> str:
        norm = check_path(path, write=True, read_only=self.read_only)
        target, data = self.host_path(norm), encode_text(text)
        if self._download(norm) == data:
            return norm
        try:
            try:
                responses = self.backend.upload_files([(target, data)])
                error = responses[0].error if responses else "no response"
            except NotImplementedError:
                error = self.backend.write(target, text).error
        except Exception as exc:
            raise self._error(norm, exc) from exc
        if error:
            raise FileBackendError(norm, str(error))
        return norm

    async def awrite_text(self, path: str, text: str) -> str:
        norm = check_path(path, write=True, read_only=self.read_only)
        target, data = self.host_path(norm), encode_text(text)
        if await self._adownload(norm) == data:
            return norm
        try:
            try:
                responses = await self.backend.aupload_files([(target, data)])
                error = responses[0].error if responses else "no response"
            except NotImplementedError:
                error = (await self.backend.awrite(target, text)).error
        except Exception as exc:
            raise self._error(norm, exc) from exc
        if error:
            raise FileBackendError(norm, str(error))
        return norm

    @staticmethod
    def _content(responses: Any) -> bytes | None:
        if not responses or responses[0].error or responses[0].content is None:
            return None
        content: bytes = responses[0].content
        return content

    def _download(self, norm: str) -> bytes | None:
        try:
            return self._content(self.backend.download_files([self.host_path(norm)]))
        except Exception as exc:
            raise self._error(norm, exc) from exc

    async def _adownload(self, norm: str) -> bytes | None:
        try:
            return self._content(await self.backend.adownload_files([self.host_path(norm)]))
        except Exception as exc:
            raise self._error(norm, exc) from exc

    def read_text(self, path: str) -> str:
        norm = check_path(path, read_only=self.read_only)
        data = self._download(norm)
        if data is None:
            raise FileBackendError(norm, "no such file")
        return decode_text(data)

    def exists(self, path: str) -> bool:
        return self._download(check_path(path, read_only=self.read_only)) is not None

    def __repr__(self) -> str:
        return f"DeepAgentsFileBackend({self.backend!r}, scope={self.scope!r})"


BackendSource = FileBackend | Callable[[Any], Any] | Any


def _context_value(context: Any, *names: str) -> Any:
    for name in names:
        if isinstance(context, Mapping):
            value = context.get(name)
        else:
            value = getattr(context, name, None)
        if value is not None:
            return value
    return None


class BackendResolver:
    """Finds the file backend of one model call (see the module doc).

    ``default`` is a core backend, a deepagents backend, a factory called with
    the LangGraph runtime, or ``None``: the agent's own backend (deepagents' file
    tools), else the graph's store (``runtime.store``), else
    :func:`ars_core.default_backend` (built when first needed). Every backend is scoped by
    ``scope`` (the thread id); scoped backends are cached, at most
    ``max_cached`` of them.
    """

    CONTEXT_FIELDS = ("file_backend", "ars_backend")

    def __init__(self, default: BackendSource | None = None, *, max_cached: int = 256) -> None:
        self.default = default
        self._fallback: FileBackend | None = None
        self.max_cached = max_cached
        self._lock = threading.Lock()
        self._scoped: OrderedDict[tuple[int, str], tuple[Any, FileBackend]] = OrderedDict()

    def resolve(self, runtime: Any, scope: str, tools: Iterable[Any] = ()) -> FileBackend:
        """The backend of a call on thread ``scope``; ``tools`` are the agent's tools."""
        context = getattr(runtime, "context", None)
        source = _context_value(context, *self.CONTEXT_FIELDS) if context is not None else None
        if source is None:
            source = self.default
        if source is None:
            source = agent_backend(tools)
        if source is None:
            source = getattr(runtime, "store", None)
        if source is None:
            source = self.fallback
        if callable(source) and not _is_backend(source):
            source = source(runtime)
        return self._wrap(source, scope)

    @property
    def fallback(self) -> FileBackend:
        """Where files go when nothing else says: :func:`ars_core.default_backend`."""
        with self._lock:
            if self._fallback is None:
                self._fallback = default_backend()
            return self._fallback

    def agent_path(self, runtime: Any, scope: str, tool: Any, path: str) -> str | None:
        """Where the agent's file tool ``tool`` finds ARS's file ``path`` on thread
        ``scope``, when that differs from ``path`` (a shared backend); else ``None``."""
        if output_folder(path) is None:
            return None
        norm = path.strip().lstrip("/")
        try:
            backend = self.resolve(runtime, scope, (tool,))
            mapped = getattr(backend, "agent_path", None)
            target = mapped(norm) if mapped is not None else None
        except Exception:  # not a path ARS could have written: leave the call alone
            return None
        if not isinstance(target, str) or target.lstrip("/") == norm:
            return None
        return target

    def _wrap(self, source: Any, scope: str) -> FileBackend:
        """``source`` scoped to ``scope`` (a backend that needs no scope as it is); a
        scoped backend is cached, so a call on a known thread costs one lookup."""
        key = (id(source), scope)
        with self._lock:
            hit = self._scoped.get(key)
            if hit is not None and hit[0] is source:
                self._scoped.move_to_end(key)
                return hit[1]
        deep = is_deepagents_backend(source)
        scoped: FileBackend
        if deep:
            scoped = self._scope(source, scope)
        elif _is_store(source):
            scoped = StoreFileBackend(source, scope=scope)
        elif isinstance(source, FsspecBackend) and source.scope is None:
            scoped = source.scoped(scope)
        elif _is_backend(source):
            same: FileBackend = source  # already scoped, or the application's own: as it is
            return same
        else:
            raise TypeError(f"not a file backend: {source!r}")
        with self._lock:
            self._scoped[key] = (source, scoped)
            while len(self._scoped) > self.max_cached:
                self._scoped.popitem(last=False)
        return scoped

    @staticmethod
    def _scope(source: Any, scope: str) -> FileBackend:
        if _keeps_threads_apart(source):
            return DeepAgentsFileBackend(source)
        local = _filesystem_root(source)
        if local is not None:  # on disk: ARS writes atomically, inside root_dir
            root, virtual = local
            files = FsspecBackend(root.as_uri()).scoped(scope)
            shown = "/" if virtual else root.as_posix().rstrip("/") + "/"
            return _AgentView(files, f"{shown}threads/{files.scope}/")
        return DeepAgentsFileBackend(source, scope=scope)


def _is_store(obj: Any) -> bool:
    """Whether ``obj`` is a LangGraph store (``runtime.store``)."""
    from langgraph.store.base import BaseStore

    return isinstance(obj, BaseStore)


def reads_agent_files(backend: Any) -> bool:
    """Whether ``backend`` keeps ARS's files where the agent's own ``read_file`` reads
    them (a deepagents backend): the agent needs no read-back tool then."""
    return isinstance(backend, DeepAgentsFileBackend | _AgentView)


def _is_backend(obj: Any) -> bool:
    return all(
        callable(getattr(obj, name, None)) for name in ("write_text", "read_text", "exists")
    ) or (is_deepagents_backend(obj))
