"""File backends for the LangChain adapter.

* :class:`DeepAgentsFileBackend` adapts a deepagents ``BackendProtocol`` (the
  backend behind the agent's own ``ls``/``read_file`` tools) to the core
  :class:`~ars_core.FileBackend`: ARS's virtual ``outputs/...`` paths become
  ``/outputs/...`` there, exactly what ``read_file("outputs/...")`` opens.
* :class:`BackendResolver` picks the backend of one model call: the runtime
  context's ``file_backend`` (or ``ars_backend``) when set, else the
  middleware's own; an fsspec backend without a scope is scoped to the
  conversation thread (cached per thread). Sub-agents run with their parent's
  ``thread_id``, so they share the parent's scope.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from ars_core import FileBackend, FileBackendError, FsspecBackend, check_path
from ars_core.files import DEFAULT_READ_ONLY, decode_text, encode_text

__all__ = ["BackendResolver", "DeepAgentsFileBackend", "is_deepagents_backend"]


def is_deepagents_backend(obj: Any) -> bool:
    """Whether ``obj`` is a deepagents ``BackendProtocol`` (deepagents need not be installed)."""
    try:
        from deepagents.backends.protocol import BackendProtocol
    except ImportError:  # pragma: no cover - deepagents is part of the langchain extra
        return False
    return isinstance(obj, BackendProtocol)


class DeepAgentsFileBackend:
    """A core file backend over a deepagents ``BackendProtocol``.

    Paths are checked with :func:`ars_core.check_path` and mapped to
    ``/<path>``. Writes overwrite (``upload_files``, falling back to
    ``write``); a ``StateBackend`` must be used inside the graph run, which is
    where the middleware calls it.
    """

    def __init__(self, backend: Any, *, read_only: tuple[str, ...] = DEFAULT_READ_ONLY) -> None:
        self.backend = backend
        self.read_only = read_only

    @staticmethod
    def host_path(path: str) -> str:
        return "/" + path

    def write_text(self, path: str, text: str) -> str:
        norm = check_path(path, write=True, read_only=self.read_only)
        target = self.host_path(norm)
        try:
            try:
                responses = self.backend.upload_files([(target, encode_text(text))])
                error = responses[0].error if responses else "no response"
            except NotImplementedError:
                error = self.backend.write(target, text).error
        except FileBackendError:
            raise
        except Exception as exc:
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc
        if error:
            raise FileBackendError(norm, str(error))
        return norm

    async def awrite_text(self, path: str, text: str) -> str:
        norm = check_path(path, write=True, read_only=self.read_only)
        target = self.host_path(norm)
        try:
            try:
                responses = await self.backend.aupload_files([(target, encode_text(text))])
                error = responses[0].error if responses else "no response"
            except NotImplementedError:
                error = (await self.backend.awrite(target, text)).error
        except Exception as exc:
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc
        if error:
            raise FileBackendError(norm, str(error))
        return norm

    def _download(self, norm: str) -> bytes | None:
        try:
            responses = self.backend.download_files([self.host_path(norm)])
        except Exception as exc:
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc
        if not responses or responses[0].error or responses[0].content is None:
            return None
        content: bytes = responses[0].content
        return content

    def read_text(self, path: str) -> str:
        norm = check_path(path, read_only=self.read_only)
        data = self._download(norm)
        if data is None:
            raise FileBackendError(norm, "no such file")
        return decode_text(data)

    def exists(self, path: str) -> bool:
        return self._download(check_path(path, read_only=self.read_only)) is not None

    def __repr__(self) -> str:
        return f"DeepAgentsFileBackend({self.backend!r})"


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
    """Finds the file backend of one model call (see the module docstring).

    ``default`` is a core backend, a deepagents backend, or a factory called
    with the LangGraph runtime. An unscoped :class:`~ars_core.FsspecBackend`
    is scoped by ``scope`` (the thread id); scoped backends are cached, at most
    ``max_cached`` of them.
    """

    CONTEXT_FIELDS = ("file_backend", "ars_backend")

    def __init__(self, default: BackendSource | None = None, *, max_cached: int = 256) -> None:
        self.default = default if default is not None else FsspecBackend("memory://ars")
        self.max_cached = max_cached
        self._lock = threading.Lock()
        self._scoped: OrderedDict[tuple[int, str], tuple[Any, FileBackend]] = OrderedDict()

    def resolve(self, runtime: Any, scope: str) -> FileBackend:
        context = getattr(runtime, "context", None)
        source = _context_value(context, *self.CONTEXT_FIELDS) if context is not None else None
        if source is None:
            source = self.default
        if callable(source) and not _is_backend(source):
            source = source(runtime)
        return self._wrap(source, scope)

    def _wrap(self, source: Any, scope: str) -> FileBackend:
        if is_deepagents_backend(source):
            return DeepAgentsFileBackend(source)
        if isinstance(source, FsspecBackend) and source.scope is None:
            key = (id(source), scope)
            with self._lock:
                hit = self._scoped.get(key)
                if hit is not None and hit[0] is source:
                    self._scoped.move_to_end(key)
                    return hit[1]
                scoped = source.scoped(scope)
                self._scoped[key] = (source, scoped)
                while len(self._scoped) > self.max_cached:
                    self._scoped.popitem(last=False)
                return scoped
        if not _is_backend(source):
            raise TypeError(f"not a file backend: {source!r}")
        backend: FileBackend = source
        return backend


def _is_backend(obj: Any) -> bool:
    return all(
        callable(getattr(obj, name, None)) for name in ("write_text", "read_text", "exists")
    ) or (is_deepagents_backend(obj))
