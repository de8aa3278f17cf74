"""File backends: where offloaded tool results and archived history go (R36-R38).

Messages only ever see *virtual* paths such as
``outputs/large_tool_results/bash-<sha256>.txt``; a backend maps them onto a
real filesystem under its root and a per-thread scope, so no host path ever
reaches the model (R37). Every path is checked: no absolute paths, no ``..``,
no writes into read-only areas (the public ``skills`` area by default).

File names are content hashes (R38). Nothing is redacted or encrypted: the
files have the same sensitivity as the conversation itself.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from .errors import FileBackendError, PathBoundaryError

__all__ = [
    "DEFAULT_READ_ONLY",
    "FileBackend",
    "FsspecBackend",
    "check_path",
    "sanitize_name",
    "scope_name",
]

#: virtual areas no ARS write may touch (the public Skills area)
DEFAULT_READ_ONLY: tuple[str, ...] = ("skills",)

_DRIVE = re.compile(r"^[A-Za-z]:")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@runtime_checkable
class FileBackend(Protocol):
    """Reads and writes text under virtual paths (``outputs/...``).

    Implementations check every path with :func:`check_path` and raise
    :class:`~ars_core.errors.FileBackendError` when the storage fails.
    """

    def write_text(self, path: str, text: str) -> str:
        """Write ``text`` at the virtual ``path``; return the virtual path written."""
        ...

    def read_text(self, path: str) -> str:
        """Read the text at the virtual ``path``."""
        ...

    def exists(self, path: str) -> bool:
        """Whether something is stored at the virtual ``path``."""
        ...


def sanitize_name(name: str, *, default: str = "tool", max_length: int = 64) -> str:
    """Make a tool name safe to use inside a file name (R37).

    Anything but letters, digits, ``_``, ``.`` and ``-`` becomes ``_``; leading
    dots are dropped so ``..`` can never survive.
    """
    cleaned = _UNSAFE.sub("_", name or "").strip("._-")
    cleaned = cleaned.replace("..", "_")
    return cleaned[:max_length] or default


def scope_name(scope: str) -> str:
    """A file-system-safe, collision-free directory name for a scope (thread id).

    Safe names are kept as they are; any other gets a hash of the raw name
    appended, so ``"a/b"`` and ``"a_b"`` (or ``"../etc"`` and ``"etc"``) never share
    a scope.
    """
    safe = sanitize_name(scope, default="default", max_length=96)
    if safe != scope:
        digest = hashlib.sha256(scope.encode("utf-8")).hexdigest()[:12]
        safe = f"{safe}-{digest}"
    return safe


def check_path(
    path: str, *, write: bool = False, read_only: Sequence[str] = DEFAULT_READ_ONLY
) -> str:
    """Validate a virtual path and return it normalised (R37).

    Raises :class:`~ars_core.errors.PathBoundaryError` for an empty path, a NUL
    byte, a backslash, an absolute path or drive, a ``~`` home path, any ``..``
    segment, and (when ``write``) a path inside a ``read_only`` area.
    """
    if not isinstance(path, str) or not path.strip():
        raise PathBoundaryError(str(path), "empty path")
    if "\x00" in path:
        raise PathBoundaryError(path, "NUL byte in path")
    if "\\" in path:
        raise PathBoundaryError(path, "backslash in path")
    if path.startswith("/") or _DRIVE.match(path):
        raise PathBoundaryError(path, "absolute paths are not allowed")
    if path.startswith("~"):
        raise PathBoundaryError(path, "home-relative paths are not allowed")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise PathBoundaryError(path, "'..' segments are not allowed")
    if not parts:
        raise PathBoundaryError(path, "empty path")
    norm = "/".join(parts)
    if write:
        for area in read_only:
            area = area.strip("/")
            if norm == area or norm.startswith(area + "/"):
                raise PathBoundaryError(path, f"the {area!r} area is read-only")
    return norm


class FsspecBackend:
    """A :class:`FileBackend` over any fsspec filesystem.

    ``url`` is an fsspec URL naming the root (``memory://ars``, ``file:///srv/ars``,
    ``s3://bucket/prefix``...); ``storage_options`` go to the filesystem.
    :meth:`scoped` gives the backend of one conversation thread; a sub-agent
    uses its parent thread's scope so both see the same files (R36).
    """

    def __init__(
        self,
        url: str = "memory://ars",
        *,
        storage_options: dict[str, Any] | None = None,
        fs: Any = None,
        scope: str | None = None,
        read_only: Sequence[str] = DEFAULT_READ_ONLY,
    ) -> None:
        import fsspec
        from fsspec.core import url_to_fs

        self.url = url
        self.storage_options = dict(storage_options or {})
        if fs is None:
            fs, root = url_to_fs(url, **self.storage_options)
        else:
            root = fs._strip_protocol(url)
        self.fs: fsspec.AbstractFileSystem = fs
        self.root: str = str(root).rstrip("/")
        self.scope = scope
        self.read_only = tuple(read_only)
        self._children: dict[str, FsspecBackend] = {}

    def scoped(self, scope: str) -> FsspecBackend:
        """The same storage, scoped to one thread (``threads/<scope>/``).

        The same scope always gives the same backend object, so what the engine
        remembers having written there is kept across calls.
        """
        child = self._children.get(scope)
        if child is None:
            child = FsspecBackend(
                self.url,
                storage_options=self.storage_options,
                fs=self.fs,
                scope=scope_name(scope),
                read_only=self.read_only,
            )
            self._children[scope] = child
        return child

    def _host(self, path: str) -> str:
        parts = [self.root] if self.root else []
        if self.scope:
            parts += ["threads", self.scope]
        return posixpath.join(*parts, path) if parts else path

    def write_text(self, path: str, text: str) -> str:
        norm = check_path(path, write=True, read_only=self.read_only)
        host = self._host(norm)
        try:
            parent = posixpath.dirname(host)
            if parent:
                self.fs.makedirs(parent, exist_ok=True)
            with self.fs.open(host, "wb") as fh:
                fh.write(text.encode("utf-8"))
        except Exception as exc:  # storage errors vary by filesystem
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc
        return norm

    def read_text(self, path: str) -> str:
        norm = check_path(path, read_only=self.read_only)
        try:
            with self.fs.open(self._host(norm), "rb") as fh:
                data: bytes = fh.read()
        except FileNotFoundError as exc:
            raise FileBackendError(norm, "no such file") from exc
        except Exception as exc:
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc
        return data.decode("utf-8")

    def exists(self, path: str) -> bool:
        norm = check_path(path, read_only=self.read_only)
        try:
            return bool(self.fs.exists(self._host(norm)))
        except Exception as exc:
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc

    def __repr__(self) -> str:
        return f"FsspecBackend({self.url!r}, scope={self.scope!r})"
