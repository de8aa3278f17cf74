"""What the warm-against-fresh differential tests share (tests/core, tests/langchain
and tests/llamaindex ``test_warm_matches_fresh``): the examples they draw, the
parameters of the adapters' twins, and emptying a memory backend."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ars_core import FsspecBackend, SummaryConfig

__all__ = ["DERANDOMIZE", "EXAMPLES", "adapter_config", "adapter_hunt", "cleared"]

#: examples per mode (``ARS_WARM_EXAMPLES`` raises it for a local hunt)
EXAMPLES = int(os.environ.get("ARS_WARM_EXAMPLES", "15"))
#: CI runs the same examples every time; a hunt (``ARS_WARM_EXAMPLES`` set) draws new ones
DERANDOMIZE = "ARS_WARM_EXAMPLES" not in os.environ

F = TypeVar("F", bound=Callable[..., Any])


def adapter_hunt(ops: Sequence[str]) -> Callable[[F], F]:
    """An adapter's differential test over 3-14 edits drawn from ``ops`` (each with two
    numbers that place it), T of 1, 2 or 4 K tokens, 2, 4 or 10 kept messages, sync
    and async, the approximate and the exact o200k estimator."""

    def decorate(test: F) -> F:
        steps = st.lists(
            st.tuples(st.sampled_from(list(ops)), st.integers(0, 99), st.integers(0, 99)),
            min_size=3,
            max_size=14,
        )
        hunted = given(
            steps=steps,
            threshold=st.sampled_from([1.0, 2.0, 4.0]),
            keep=st.sampled_from([2, 4, 10]),
        )(test)
        hunted = settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=DERANDOMIZE,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )(hunted)
        hunted = pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])(hunted)
        marked: F = pytest.mark.parametrize("estimator", ["approx", "o200k"])(hunted)
        return marked

    return decorate


def adapter_config(threshold: float, keep: int) -> SummaryConfig:
    """An adapter example's settings: T (K tokens), kept messages, and a tool-result
    limit the examples' large results pass (L1 offloads them)."""
    return SummaryConfig(
        summary_threshold=threshold,
        summary_keep_messages=keep,
        summary_tool_result_token_limit=200,
    )


def cleared(backend: FsspecBackend) -> None:
    """``backend``'s files removed from fsspec's memory store, which every memory
    backend of the process shares (and every lookup in it reads whole)."""
    base = backend._host("")
    if backend.fs.exists(base):
        backend.fs.rm(base, recursive=True)
