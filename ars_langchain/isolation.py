"""Thread isolation on a deepagents backend every thread shares.

ARS keeps each thread's files under ``/threads/<scope>/`` of a shared backend
(a ``FilesystemBackend``, a store). Routing the agent's reads of ARS's folders
to the caller's copy is not enough: every file tool (``read_file``,
``write_file``, ``edit_file``, ``ls``, ``glob``, ``grep``) can also name
``/threads/<another thread>/...`` or search a folder above it.
:class:`ThreadIsolatedBackend` stands in front of the shared backend (the
middleware installs it on the deepagents ``FilesystemMiddleware`` whose tools
the agent calls) and, for the thread of the tool call in progress:

* refuses to read, write, edit, delete, upload or download a path inside
  another thread's folder, and to list, glob or grep inside one (an error
  result naming the path, as deepagents reports a refused path);
* leaves other threads' folders out of every listing, glob and grep result
  that reaches above them (``ls /threads``, ``glob("**/*")``, ``grep`` from
  ``/``);
* leaves out the temporary files of interrupted atomic writes
  (``.<name>.ars-tmp-<random>``).

The thread comes from :data:`CURRENT_SCOPE`, set around each tool call by
:class:`~ars_langchain.ArsFileRedirectMiddleware`; with none set (a call
outside a tool call of an agent with ARS) every thread folder is refused.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Any

from ars_core.adapter import is_temporary, scope_name

try:
    from deepagents.backends.protocol import (
        BackendProtocol,
        DeleteResult,
        EditResult,
        FileDownloadResponse,
        FileUploadResponse,
        GlobResult,
        GrepResult,
        LsResult,
        ReadResult,
        WriteResult,
    )
except ImportError:  # pragma: no cover - deepagents is part of the langchain extra
    BackendProtocol = object  # type: ignore[assignment,misc]

__all__ = ["CURRENT_SCOPE", "ThreadIsolatedBackend"]

#: the file scope (thread) of the tool call in progress
CURRENT_SCOPE: ContextVar[str | None] = ContextVar("ars_current_scope", default=None)


class ThreadIsolatedBackend(BackendProtocol):
    """``inner`` (a deepagents backend shared by threads) seen by one thread at
    a time (see the module doc). ``threads_dirs`` are the folders holding the
    thread scopes as the agent names them (``/threads``, and
    ``<root_dir>/threads`` for a ``FilesystemBackend`` outside virtual mode).
    Any other attribute is the inner backend's."""

    def __init__(self, inner: Any, threads_dirs: Sequence[str] = ("/threads",)) -> None:
        self.inner = inner
        self.threads_dirs = tuple(d.rstrip("/") + "/" for d in threads_dirs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"ThreadIsolatedBackend({self.inner!r})"

    # ------------------------------------------------------------ the rule

    def foreign(self, path: str | None) -> bool:
        """Whether ``path`` lies in a thread folder other than the current thread's."""
        if not path:
            return False
        norm = posixpath.normpath("/" + path.lstrip("/")) + "/"
        scope = CURRENT_SCOPE.get()
        own = scope_name(scope) if scope is not None else None
        for folder in self.threads_dirs:
            if norm.startswith(folder) and norm != folder:
                return norm[len(folder) :].split("/", 1)[0] != own
        return False

    def _hidden(self, path: Any) -> bool:
        return isinstance(path, str) and (self.foreign(path) or is_temporary(path))

    def _keep(self, entries: Iterable[Any] | None) -> list[Any] | None:
        if entries is None:
            return None
        return [e for e in entries if not self._hidden(_entry_path(e))]

    @staticmethod
    def _refusal(path: str) -> str:
        return f"permission denied: '{path}' is another conversation's folder"

    # ------------------------------------------------------------ listings

    def _ls(self, path: str, result: Any) -> Any:
        return dataclasses.replace(result, entries=self._keep(result.entries))

    def ls(self, path: str) -> Any:
        if self.foreign(path):
            return LsResult(error=self._refusal(path))
        return self._ls(path, self.inner.ls(path))

    async def als(self, path: str) -> Any:
        if self.foreign(path):
            return LsResult(error=self._refusal(path))
        return self._ls(path, await self.inner.als(path))

    def glob(self, pattern: str, path: str | None = None) -> Any:
        if self.foreign(path):
            return GlobResult(error=self._refusal(str(path)))
        result = self.inner.glob(pattern, path)
        return dataclasses.replace(result, matches=self._keep(result.matches))

    async def aglob(self, pattern: str, path: str | None = None) -> Any:
        if self.foreign(path):
            return GlobResult(error=self._refusal(str(path)))
        result = await self.inner.aglob(pattern, path)
        return dataclasses.replace(result, matches=self._keep(result.matches))

    def grep(self, pattern: str, path: str | None = None, *args: Any, **kwargs: Any) -> Any:
        if self.foreign(path):
            return GrepResult(error=self._refusal(str(path)))
        result = self.inner.grep(pattern, path, *args, **kwargs)
        return dataclasses.replace(result, matches=self._keep(result.matches))

    async def agrep(self, pattern: str, path: str | None = None, *args: Any, **kwargs: Any) -> Any:
        if self.foreign(path):
            return GrepResult(error=self._refusal(str(path)))
        result = await self.inner.agrep(pattern, path, *args, **kwargs)
        return dataclasses.replace(result, matches=self._keep(result.matches))

    # ------------------------------------------------------------ one file

    def read(self, file_path: str, *args: Any, **kwargs: Any) -> Any:
        if self.foreign(file_path):
            return ReadResult(error=self._refusal(file_path))
        return self.inner.read(file_path, *args, **kwargs)

    async def aread(self, file_path: str, *args: Any, **kwargs: Any) -> Any:
        if self.foreign(file_path):
            return ReadResult(error=self._refusal(file_path))
        return await self.inner.aread(file_path, *args, **kwargs)

    def write(self, file_path: str, *args: Any, **kwargs: Any) -> Any:
        if self.foreign(file_path):
            return WriteResult(error=self._refusal(file_path))
        return self.inner.write(file_path, *args, **kwargs)

    async def awrite(self, file_path: str, *args: Any, **kwargs: Any) -> Any:
        if self.foreign(file_path):
            return WriteResult(error=self._refusal(file_path))
        return await self.inner.awrite(file_path, *args, **kwargs)

    def edit(self, file_path: str, *args: Any, **kwargs: Any) -> Any:
        if self.foreign(file_path):
            return EditResult(error=self._refusal(file_path))
        return self.inner.edit(file_path, *args, **kwargs)

    async def aedit(self, file_path: str, *args: Any, **kwargs: Any) -> Any:
        if self.foreign(file_path):
            return EditResult(error=self._refusal(file_path))
        return await self.inner.aedit(file_path, *args, **kwargs)

    def delete(self, file_path: str) -> Any:
        if self.foreign(file_path):
            return DeleteResult(error=self._refusal(file_path))
        return self.inner.delete(file_path)

    async def adelete(self, file_path: str) -> Any:
        if self.foreign(file_path):
            return DeleteResult(error=self._refusal(file_path))
        return await self.inner.adelete(file_path)

    # ------------------------------------------------------------ batches

    def _split(self, paths: Sequence[str]) -> tuple[list[int], list[int]]:
        foreign = [i for i, p in enumerate(paths) if self.foreign(p)]
        return foreign, [i for i in range(len(paths)) if i not in set(foreign)]

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[Any]:
        foreign, allowed = self._split([p for p, _ in files])
        done = self.inner.upload_files([files[i] for i in allowed]) if allowed else []
        return _merge(len(files), allowed, done, foreign, files, FileUploadResponse)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[Any]:
        foreign, allowed = self._split([p for p, _ in files])
        done = await self.inner.aupload_files([files[i] for i in allowed]) if allowed else []
        return _merge(len(files), allowed, done, foreign, files, FileUploadResponse)

    def download_files(self, paths: list[str]) -> list[Any]:
        foreign, allowed = self._split(paths)
        done = self.inner.download_files([paths[i] for i in allowed]) if allowed else []
        return _merge(len(paths), allowed, done, foreign, paths, FileDownloadResponse)

    async def adownload_files(self, paths: list[str]) -> list[Any]:
        foreign, allowed = self._split(paths)
        done = await self.inner.adownload_files([paths[i] for i in allowed]) if allowed else []
        return _merge(len(paths), allowed, done, foreign, paths, FileDownloadResponse)


def _entry_path(entry: Any) -> Any:
    return entry.get("path") if isinstance(entry, dict) else getattr(entry, "path", None)


def _merge(
    n: int,
    allowed: list[int],
    done: Sequence[Any],
    foreign: list[int],
    items: Sequence[Any],
    response: Any,
) -> list[Any]:
    """The inner backend's answers for ``allowed``, refusals for ``foreign``, in order."""
    out: list[Any] = [None] * n
    for i, answer in zip(allowed, done, strict=False):
        out[i] = answer
    for i in foreign:
        item = items[i]
        out[i] = response(
            path=item[0] if isinstance(item, tuple) else item, error="permission_denied"
        )
    return out
