"""Plugin hook specifications (pluggy), all in one place.

A plugin is any module or object with functions marked ``@ars_core.hookimpl``;
third-party packages expose one through the ``ars`` entry-point group::

    [project.entry-points.ars]
    my_plugin = "my_package.ars_plugin"

ARS's built-in estimators, file backends and summarizer are registered through
these same hooks (``ars_core.builtins``); ``ars plugins`` lists what every
plugin registered and where it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from .stream import CompressionEvent
from .summarize import AsyncSummarizer, Summarizer

__all__ = ["Register", "hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("ars")
hookimpl = pluggy.HookimplMarker("ars")

#: ``register(name, factory)``; ``factory(**options)`` builds the component
Register = Callable[[str, Callable[..., Any]], None]


@hookspec
def register_estimators(register: Register) -> None:
    """Register token estimators: ``register("name", factory)``; ``factory(**options)``
    returns an :class:`~ars_core.estimate.Estimator`."""


@hookspec
def register_file_backends(register: Register) -> None:
    """Register file backends: ``register("name", factory)``; ``factory(**options)``
    returns a :class:`~ars_core.files.FileBackend`."""


@hookspec
def register_summarizers(register: Register) -> None:
    """Register summarizers: ``register("name", factory)``; ``factory(**options)``
    returns a :class:`~ars_core.summarize.Summarizer`."""


@hookspec(firstresult=True)
def resolve_summarizer(spec: str) -> Summarizer | AsyncSummarizer | None:
    """Build the summarizer a string no registered name matches stands for (the
    LangChain adapter resolves ``"provider:model"``), or return ``None`` when
    ``spec`` is not yours. The first plugin returning one wins; raise
    :class:`~ars_core.errors.ConfigError` for a spec that is yours but cannot be built."""


@hookspec
def compression_event(event: CompressionEvent) -> None:
    """Observe every compression stream event (started / completed / failed)."""
