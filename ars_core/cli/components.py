"""Estimators and summarizers named on the command line, resolved through the plugin
registry exactly as ``Compressor(estimator="...", summarizer="...")`` resolves them."""

from __future__ import annotations

from typing import Any

from ..errors import ArsError
from ..estimate import Estimator
from ..plugins import available
from ..resolve import resolve_estimator, resolve_summarizer
from .common import CliError, exit_code, one_line

__all__ = ["installed_estimators", "make_estimator", "make_summarizer", "summarizer_name"]


def make_estimator(name: str) -> Estimator:
    """The estimator registered as ``name`` (built-ins: ``approx``, ``tiktoken``/``o200k``,
    ``cl100k``; plugins add more)."""
    try:
        estimator = resolve_estimator(name)
    except ArsError as exc:
        raise CliError(f"--estimator: {one_line(exc)}", exit_code(exc)) from exc
    assert estimator is not None
    return estimator


def make_summarizer(name: str) -> Any:
    """A registered summarizer (``extractive``, the built-in default, or a plugin's) or a
    spec a plugin resolves (``provider:model`` with the LangChain adapter installed)."""
    try:
        return resolve_summarizer(name)
    except ArsError as exc:
        raise CliError(f"--summarizer: {one_line(exc)}", exit_code(exc)) from exc


def installed_estimators() -> list[Estimator]:
    """One of each installed estimator (aliases such as ``tiktoken``/``o200k`` once)."""
    found: dict[str, Estimator] = {}
    for factory in available("estimator").values():
        try:
            est = factory()
        except Exception:  # e.g. tiktoken not installed: that estimator is not available
            continue
        found.setdefault(str(getattr(est, "name", type(est).__name__)), est)
    return list(found.values())


def summarizer_name(summarizer: Any) -> str:
    """How reports name ``summarizer``."""
    return str(getattr(summarizer, "name", None) or type(summarizer).__name__)
