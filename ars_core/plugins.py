"""The plugin manager: built-ins and third-party plugins, one path.

``get_plugin_manager()`` registers :mod:`ars_core.builtins` and every plugin
of the ``ars`` entry-point group. The environment variable ``ARS_PLUGINS``
limits which external plugins load: a comma-separated list of entry-point
names, or empty / ``none`` for none at all (built-ins always load).

``get_estimator("approx")``, ``get_file_backend("fsspec", url=...)`` and
``get_summarizer("extractive")`` build components by name.

One broken third-party plugin never takes the others (or ARS) down: a plugin
whose import fails (a package it needs is missing, or it raises), or that
implements a hook ARS does not know, is left out once (the import is not
retried) and :func:`skipped_plugins` says why; a plugin whose hook raises is
left out from then on, with a warning, and :func:`failed_plugins` says why
(``ars plugins`` reports both). Hooks are called plugin by plugin for this.
:mod:`ars_core.resolve` turns what ``Compressor(...)`` is given (names, URLs,
classes, callables) into components through them. :func:`plugin_report`
describes every registered plugin (``ars plugins``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from . import builtins, hookspecs
from .errors import PluginError
from .estimate import Estimator
from .files import FileBackend
from .stream import CompressionEvent
from .summarize import AsyncSummarizer, Summarizer

__all__ = [
    "ENTRY_POINT_GROUP",
    "available",
    "emit_to_plugins",
    "failed_plugins",
    "get_estimator",
    "get_file_backend",
    "get_plugin_manager",
    "get_summarizer",
    "plugin_report",
    "reset_plugin_manager",
    "skipped_plugins",
]

ENTRY_POINT_GROUP = "ars"
_KINDS = {
    "estimator": "register_estimators",
    "file_backend": "register_file_backends",
    "summarizer": "register_summarizers",
}

_BUILTINS = "ars.builtins"

_lock = threading.Lock()
_pm: pluggy.PluginManager | None = None
#: the entry point each external plugin was loaded from, by plugin name
_entry_points: dict[str, EntryPoint] = {}
#: why each entry-point plugin whose import failed was left out, by plugin name
_skipped: dict[str, str] = {}
#: why each registered plugin whose hook raised is left out from then on, by plugin name
_failed: dict[str, str] = {}

log = logging.getLogger("ars")


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
        except ImportError as exc:  # what the plugin needs is not installed: left out, with why
            _skipped[ep.name] = f"{ep.value}: {' '.join(str(exc).split()) or type(exc).__name__}"
            continue
        except Exception as exc:  # a broken plugin: left out, the others load
            _skipped[ep.name] = f"{ep.value}: failed to load: {_describe(exc)}"
            continue
        try:
            pm.register(plugin, name=ep.name)
            pm.check_pending()  # a hook ARS does not know: this plugin is the one
        except Exception as exc:
            if pm.get_plugin(ep.name) is not None:
                pm.unregister(name=ep.name)
            _skipped[ep.name] = f"{ep.value}: {_describe(exc)}"
            continue
        _entry_points[ep.name] = ep


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _call_each(hook: Any, **kwargs: Any) -> None:
    """Call every implementation of ``hook`` in pluggy's order, one plugin at a
    time: one that raises is left out from then on (a warning, :func:`failed_plugins`)."""
    for impl in reversed(hook.get_hookimpls()):
        name = impl.plugin_name
        if name in _failed:
            continue
        try:
            impl.function(*[kwargs[arg] for arg in impl.argnames])
        except PluginError:
            raise
        except Exception as exc:
            reason = f"its {hook.name} hook raised {_describe(exc)}"
            with _lock:
                _failed.setdefault(name, reason)
            log.warning("ARS: plugin %r left out: %s", name, reason)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager (built-ins + allowed entry points)."""
    global _pm
    with _lock:
        if _pm is None:
            pm = pluggy.PluginManager("ars")
            pm.add_hookspecs(hookspecs)
            pm.register(builtins, name=_BUILTINS)
            _load_entry_points(pm)
            pm.check_pending()
            _pm = pm
        return _pm


def reset_plugin_manager() -> None:
    """Forget the plugin manager (the next call rebuilds it; for tests)."""
    global _pm
    with _lock:
        _pm = None
        _entry_points.clear()
        _skipped.clear()
        _failed.clear()


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

    _call_each(getattr(pm.hook, _KINDS[kind]), register=register)
    return found


def _build(kind: str, name: str, options: dict[str, Any], expected: Any, what: str) -> Any:
    """The component registered as ``name``, checked to be ``expected`` (its protocol)."""
    factories = available(kind)
    if name not in factories:
        raise PluginError(kind, name, f"not registered (available: {', '.join(sorted(factories))})")
    try:
        built = factories[name](**options)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(kind, name, f"could not be built: {type(exc).__name__}: {exc}") from exc
    if not isinstance(built, expected):
        raise PluginError(kind, name, f"its factory built a {type(built).__name__}, not {what}")
    return built


def get_estimator(name: str = "approx", **options: Any) -> Estimator:
    """Build the estimator registered as ``name``."""
    built: Estimator = _build("estimator", name, options, Estimator, "an Estimator")
    return built


def get_file_backend(name: str = "fsspec", **options: Any) -> FileBackend:
    """Build the file backend registered as ``name``."""
    built: FileBackend = _build("file_backend", name, options, FileBackend, "a FileBackend")
    return built


def get_summarizer(name: str = "extractive", **options: Any) -> Summarizer | AsyncSummarizer:
    """Build the summarizer registered as ``name``."""
    built: Summarizer | AsyncSummarizer = _build(
        "summarizer", name, options, Summarizer | AsyncSummarizer, "a Summarizer"
    )
    return built


def emit_to_plugins(event: CompressionEvent) -> None:
    """Deliver a stream event to every plugin implementing ``compression_event``."""
    _call_each(get_plugin_manager().hook.compression_event, event=event)


def _source(name: str) -> dict[str, Any]:
    if name == _BUILTINS:
        return {"source": "built-in"}
    ep = _entry_points.get(name)
    if ep is None:
        return {"source": "registered in process"}
    dist = ep.dist
    return {
        "source": f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP!r})",
        "module": ep.value,
        "distribution": dist.name if dist is not None else None,
        "version": dist.version if dist is not None else None,
    }


def _provided(pm: pluggy.PluginManager, name: str) -> dict[str, list[str]]:
    """What plugin ``name`` registers, by kind (``estimators``, ``file_backends``...)."""
    provided: dict[str, list[str]] = {}
    for kind, hook in _KINDS.items():
        names: list[str] = []
        for impl in getattr(pm.hook, hook).get_hookimpls():
            if impl.plugin_name == name and name not in _failed:
                try:
                    impl.function(register=lambda n, factory, names=names: names.append(n))
                except Exception as exc:
                    with _lock:
                        _failed.setdefault(name, f"its {hook} hook raised {_describe(exc)}")
        if names:
            provided[f"{kind}s"] = names
    return provided


def skipped_plugins() -> dict[str, str]:
    """The entry-point plugins left out because their import failed (a package they need
    is not installed), each with the reason: ``{name: "module: error"}``."""
    get_plugin_manager()
    with _lock:
        return dict(_skipped)


def failed_plugins() -> dict[str, str]:
    """The registered plugins left out because one of their hooks raised, each
    with the hook and the error: ``{name: "its <hook> hook raised <error>"}``."""
    with _lock:
        return dict(_failed)


def plugin_report(pm: pluggy.PluginManager | None = None) -> list[dict[str, Any]]:
    """Every registered plugin: its name, where it came from, the hooks it
    implements and the components it registers (the ``ars plugins`` output)."""
    pm = pm or get_plugin_manager()
    report = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None or name is None:
            continue
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or ())
        entry = {"name": name, **_source(name), "hooks": hooks, **_provided(pm, name)}
        if name in _failed:
            entry["error"] = _failed[name]
        report.append(entry)
    return report
