"""The plugin manager: built-ins and third-party plugins, one path.

``get_plugin_manager()`` registers :mod:`ars_core.builtins` and every plugin
of the ``ars`` entry-point group. The environment variable ``ARS_PLUGINS``
limits which external plugins load: a comma-separated list of entry-point
names, or empty / ``none`` for none at all (built-ins always load).

``get_estimator("approx")``, ``get_file_backend("fsspec", url=...)`` and
``get_summarizer("extractive")`` build components by name.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import pluggy

from . import builtins, hookspecs
from .errors import PluginError
from .events import CompressionEvent

__all__ = [
    "ENTRY_POINT_GROUP",
    "available",
    "emit_to_plugins",
    "get_estimator",
    "get_file_backend",
    "get_plugin_manager",
    "get_summarizer",
    "reset_plugin_manager",
]

ENTRY_POINT_GROUP = "ars"
_KINDS = {
    "estimator": "register_estimators",
    "file_backend": "register_file_backends",
    "summarizer": "register_summarizers",
}

_lock = threading.Lock()
_pm: pluggy.PluginManager | None = None


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    allowed_env = os.environ.get("ARS_PLUGINS")
    allowed: set[str] | None = None
    if allowed_env is not None:
        names = {n.strip() for n in allowed_env.split(",") if n.strip()}
        allowed = set() if names <= {"none"} else names
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if allowed is not None and ep.name not in allowed:
            continue
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            raise PluginError(
                "plugin", ep.name, f"failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        pm.register(plugin, name=ep.name)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager (built-ins + allowed entry points)."""
    global _pm
    with _lock:
        if _pm is None:
            pm = pluggy.PluginManager("ars")
            pm.add_hookspecs(hookspecs)
            pm.register(builtins, name="ars.builtins")
            _load_entry_points(pm)
            pm.check_pending()
            _pm = pm
        return _pm


def reset_plugin_manager() -> None:
    """Forget the plugin manager (the next call rebuilds it; for tests)."""
    global _pm
    with _lock:
        _pm = None


def available(kind: str, pm: pluggy.PluginManager | None = None) -> dict[str, Callable[..., Any]]:
    """Every registered factory of ``kind`` (``estimator``, ``file_backend``, ``summarizer``)."""
    if kind not in _KINDS:
        raise PluginError(kind, "*", f"unknown kind (expected one of {sorted(_KINDS)})")
    pm = pm or get_plugin_manager()
    found: dict[str, Callable[..., Any]] = {}

    def register(name: str, factory: Callable[..., Any]) -> None:
        if not callable(factory):
            raise PluginError(kind, name, "factory is not callable")
        found[name] = factory

    getattr(pm.hook, _KINDS[kind])(register=register)
    return found


def _build(kind: str, name: str, options: dict[str, Any]) -> Any:
    factories = available(kind)
    if name not in factories:
        raise PluginError(kind, name, f"not registered (available: {', '.join(sorted(factories))})")
    try:
        return factories[name](**options)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(kind, name, f"could not be built: {type(exc).__name__}: {exc}") from exc


def get_estimator(name: str = "approx", **options: Any) -> Any:
    """Build the estimator registered as ``name``."""
    return _build("estimator", name, options)


def get_file_backend(name: str = "fsspec", **options: Any) -> Any:
    """Build the file backend registered as ``name``."""
    return _build("file_backend", name, options)


def get_summarizer(name: str = "extractive", **options: Any) -> Any:
    """Build the summarizer registered as ``name``."""
    return _build("summarizer", name, options)


def emit_to_plugins(event: CompressionEvent) -> None:
    """Deliver a stream event to every plugin implementing ``compression_event``."""
    get_plugin_manager().hook.compression_event(event=event)
