"""ARS's files in a LangGraph store: :class:`StoreFileBackend`.

A graph compiled with a store (``create_agent(..., store=...)``, or any graph
run by LangGraph's server, which provides a PostgreSQL-backed one) hands it to
every node as ``runtime.store``. There the middleware keeps its files: each
file is one item, keyed by its virtual path (``outputs/large_tool_results/...``)
in the namespace ``("ars", "threads", <thread>)``, so they live as long as the
store does and another thread's files are never in reach. This is the place
deepagents' ``StoreBackend`` keeps an agent's files; ARS's own items are plain
``{"text": ...}`` values (``{"base64": ...}`` for the rare text that is not
valid UTF-8, which a PostgreSQL ``jsonb`` column would refuse).

Synchronous graphs use the store's ``put``/``get``; asynchronous ones its
``aput``/``aget`` (``AsyncPostgresStore`` has only those).
"""

from __future__ import annotations

import base64
from typing import Any

from ars_core import FileBackendError, check_path
from ars_core.adapter import DEFAULT_READ_ONLY, decode_text, encode_text, scope_name, text_sha256

__all__ = ["STORE_NAMESPACE", "StoreFileBackend"]

#: the first labels of every namespace ARS writes in a store
STORE_NAMESPACE: tuple[str, ...] = ("ars",)


def _label(scope: str) -> str:
    """A namespace label for ``scope``: store labels may not hold ``.``."""
    name = scope_name(scope)
    if "." in name:
        name = f"{name.replace('.', '_')}-{text_sha256(scope)[:12]}"
    return name


def _value(text: str) -> dict[str, Any]:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: kept exactly, as bytes
        return {"base64": base64.b64encode(encode_text(text)).decode("ascii")}
    return {"text": text}


def _text(norm: str, item: Any) -> str | None:
    if item is None:
        return None
    value = getattr(item, "value", None) or {}
    if isinstance(value.get("text"), str):
        text: str = value["text"]
        return text
    if isinstance(value.get("base64"), str):
        return decode_text(base64.b64decode(value["base64"]))
    raise FileBackendError(norm, "the store item is not a file ARS wrote")


def _found(norm: str, text: str | None) -> str:
    if text is None:
        raise FileBackendError(norm, "no such file")
    return text


class StoreFileBackend:
    """A core file backend over a LangGraph ``BaseStore`` (``runtime.store``).

    ``scope`` is the conversation thread (see :meth:`scoped`); ``namespace`` the
    labels before it. Paths are checked with :func:`ars_core.check_path`; a file
    that already holds the text is not written again (files are named by their
    content). Store items are written with ``index=False``: ARS's files are not
    for semantic search.
    """

    def __init__(
        self,
        store: Any,
        *,
        scope: str | None = None,
        namespace: tuple[str, ...] = STORE_NAMESPACE,
        read_only: tuple[str, ...] = DEFAULT_READ_ONLY,
    ) -> None:
        self.store = store
        self.scope = scope
        self.base = tuple(namespace)
        self.namespace = (*self.base, "threads", _label(scope)) if scope is not None else self.base
        self.read_only = read_only

    def scoped(self, scope: str) -> StoreFileBackend:
        """The same store, one thread's namespace."""
        return type(self)(self.store, scope=scope, namespace=self.base, read_only=self.read_only)

    def _error(self, norm: str, exc: Exception) -> FileBackendError:
        return FileBackendError(norm, f"{type(exc).__name__}: {exc}")

    def _get(self, norm: str) -> str | None:
        try:
            item = self.store.get(self.namespace, norm)
        except Exception as exc:
            raise self._error(norm, exc) from exc
        return _text(norm, item)

    async def _aget(self, norm: str) -> str | None:
        try:
            item = await self.store.aget(self.namespace, norm)
        except Exception as exc:
            raise self._error(norm, exc) from exc
        return _text(norm, item)

    def write_text(self, path: str, text: str) -> str:
        norm = check_path(path, write=True, read_only=self.read_only)
        if self._get(norm) != text:
            try:
                self.store.put(self.namespace, norm, _value(text), index=False)
            except Exception as exc:
                raise self._error(norm, exc) from exc
        return norm

    async def awrite_text(self, path: str, text: str) -> str:
        norm = check_path(path, write=True, read_only=self.read_only)
        if await self._aget(norm) != text:
            try:
                await self.store.aput(self.namespace, norm, _value(text), index=False)
            except Exception as exc:
                raise self._error(norm, exc) from exc
        return norm

    def read_text(self, path: str) -> str:
        norm = check_path(path, read_only=self.read_only)
        return _found(norm, self._get(norm))

    async def aread_text(self, path: str) -> str:
        norm = check_path(path, read_only=self.read_only)
        return _found(norm, await self._aget(norm))

    def exists(self, path: str) -> bool:
        norm = check_path(path, read_only=self.read_only)
        return self._get(norm) is not None

    def __repr__(self) -> str:
        return f"StoreFileBackend({type(self.store).__name__}, namespace={self.namespace!r})"
