"""ARS's built-in components, registered through the same hooks as any plugin."""

from __future__ import annotations

from typing import Any

from .estimate import ApproxEstimator, TiktokenEstimator
from .files import FsspecBackend
from .hookspecs import Register, hookimpl
from .summarize import ExtractiveSummarizer


def _tiktoken(encoding: str) -> Any:
    return lambda **options: TiktokenEstimator(options.pop("encoding", encoding), **options)


@hookimpl
def register_estimators(register: Register) -> None:
    register("approx", ApproxEstimator)
    register("tiktoken", _tiktoken("o200k_base"))
    register("o200k", _tiktoken("o200k_base"))
    register("cl100k", _tiktoken("cl100k_base"))


@hookimpl
def register_file_backends(register: Register) -> None:
    register("fsspec", FsspecBackend)
    register(
        "memory", lambda **options: FsspecBackend(options.pop("url", "memory://ars"), **options)
    )


@hookimpl
def register_summarizers(register: Register) -> None:
    register("extractive", ExtractiveSummarizer)
