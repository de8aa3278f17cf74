"""Provider-true sizes: the provider's count of the last request, read back from the history.

A provider whose tokenizer counts 40% more than o200k (``ProviderTokenizer(1.4)``)
has a window of T of its own tokens. ARS, deciding with o200k alone, sends requests
up to T o200k tokens: 1.4 T for that provider. With the provider's usage stamped on
each answer (what the adapters do with ``usage_metadata``; here the replay's
``provider=``), the next call reads the provider/estimator ratio of the last request
and sizes every budget in the provider's tokens: no request above T. The oracle is
the provider's own count of every request the engine sent.
"""

from __future__ import annotations

import json

import pytest

from ars_core import FsspecBackend, Message, SummaryConfig, TiktokenEstimator
from ars_core.engine import CallOutcome, Compressor
from ars_core.messages import MARK_SUMMARY, message_from_dict, message_to_dict
from ars_core.provider_size import (
    MARK_PROVIDER_COUNT,
    MAX_PROVIDER_RATIO,
    provider_ratio,
    ratio_of,
    stamp,
    stamped,
)
from ars_core.replay import replay_messages
from ars_core.testing import FakeSummarizer, ProviderTokenizer, ScriptedModel
from tests.core.helpers import assistant, call, tool, user, words

pytestmark = pytest.mark.spec("R3", "R57")

T_K = 4  # T = 4,096: the provider's window, in its own tokens
SYSTEM = Message(role="system", content="You are a careful agent. " + words(40, "sys"))


def _run(steps: int = 14, size: int = 700) -> list[Message]:
    """A system message, a user request, then ``steps`` tool calls with results of
    about ``size`` tokens each, and a final answer."""
    run = [SYSTEM, user("Build the project and report. " + words(30, "task"))]
    for i in range(steps):
        c = call("build", call_id=f"call_{i}", step=i)
        run += [assistant(f"step {i}", c), tool(c, f"log {i}\n" + words(size, f"log{i}"))]
    run.append(assistant("done"))
    return run


Decision = tuple[str | None, list[str | None]]


def _replay(run: list[Message], factor: float, *, usage: bool) -> tuple[list[int], list[Decision]]:
    """The provider's count of every request ARS sends while replaying ``run``
    (answers stamped with that count when ``usage``), and each call's decision: its
    level and the messages of the history it sent (the summary left out)."""
    o200k = TiktokenEstimator("o200k_base")
    provider = ProviderTokenizer(factor, o200k)
    sizes: list[int] = []
    decisions: list[Decision] = []

    def on_call(outcome: CallOutcome, system: Message | None) -> None:
        sizes.append(provider.count(outcome.view, system=system))
        sent = [m.id for m in outcome.view if not m.metadata.get(MARK_SUMMARY)]
        decisions.append((outcome.level, sent))

    replay_messages(
        run,
        config=SummaryConfig(summary_threshold=T_K, summary_keep_messages=4),
        estimator=TiktokenEstimator("o200k_base"),
        summarizer=FakeSummarizer("the summary"),
        backend=FsspecBackend("memory://provider-size"),
        on_call=on_call,
        provider=provider if usage else None,
    )
    return sizes, decisions


def _provider_sizes(run: list[Message], factor: float, *, usage: bool) -> list[int]:
    return _replay(run, factor, usage=usage)[0]


def test_a_provider_that_counts_more_keeps_every_request_in_its_window() -> None:
    run = _run()
    without = _provider_sizes(run, 1.4, usage=False)
    with_usage = _provider_sizes(run, 1.4, usage=True)
    threshold = T_K * 1024
    assert len(without) == len(with_usage) == 15
    assert any(s > threshold for s in without)  # o200k alone: over the provider's window
    assert max(with_usage) <= threshold, with_usage
    assert max(with_usage) > threshold // 2  # still uses the window, not a tiny part of it


def test_usage_that_counts_no_more_than_the_estimator_decides_as_before() -> None:
    run = _run()
    for factor in (1.0, 0.8):
        decisions = _replay(run, factor, usage=True)[1]
        assert decisions == _replay(run, factor, usage=False)[1]
        assert [level for level, _ in decisions].count("L2") == 2  # the oracle sees rounds


def _compressor() -> Compressor:
    return Compressor(
        SummaryConfig(summary_threshold=T_K, summary_keep_messages=4),
        estimator=TiktokenEstimator("o200k_base"),
        backend=FsspecBackend("memory://provider-size-call"),
        summarizer=FakeSummarizer("the summary"),
    )


def _history(record: object) -> list[Message]:
    """About 3,300 o200k tokens (below T), the newest answer carrying ``record``."""
    history = _run(steps=4, size=700)[1:-1]
    answer = assistant("checking the logs")
    if record is not None:
        answer = answer.with_content(answer.content, **{MARK_PROVIDER_COUNT: record})
    return [*history, answer, user("and now?")]


def _sent(history: list[Message]) -> tuple[str | None, list[Message]]:
    model = ScriptedModel(["ok"])
    outcome = _compressor().call(history, model, system=SYSTEM)
    return outcome.level, model.calls[-1]


def test_a_reading_read_back_in_a_cold_process_is_used() -> None:
    o200k = TiktokenEstimator("o200k_base")
    record = stamp(1400, 1000, o200k)  # the last request: 1.4 provider tokens per o200k
    history = _history(record)
    assert o200k.count(history, system=SYSTEM) < T_K * 1024 < 1.4 * o200k.count(history)
    # the checkpoint's JSON, read back as new message objects
    cold = [message_from_dict(json.loads(json.dumps(message_to_dict(m)))) for m in history]
    assert cold[-2].metadata[MARK_PROVIDER_COUNT] == record
    level, view = _sent(cold)
    assert level is not None  # compressed: the provider would count it above T
    assert 1.4 * o200k.count(view, system=SYSTEM) <= T_K * 1024
    assert _sent(_history(None))[0] is None  # the same history without usage: sent whole


def test_a_reading_of_another_estimator_or_an_older_answer_is_not_used() -> None:
    o200k = TiktokenEstimator("o200k_base")
    other = stamp(1400, 1000, type("Other", (), {"name": "approx"})())
    assert ratio_of(other, o200k) == 1.0
    level, view = _sent(_history(other))
    whole = _history(None)
    assert level is None and [m.content for m in view] == [m.content for m in whole]
    # only the newest answer is read: a stamp on an older one is not this request's
    older = _history(None)
    older[1] = stamped(older[1], 1400, 1000, o200k)
    assert provider_ratio(older, o200k) == 1.0
    assert _sent(older)[0] is None


def test_the_ratio_only_grows_budgets_down_and_is_bounded() -> None:
    o200k = TiktokenEstimator("o200k_base")
    assert ratio_of(stamp(1400, 1000, o200k), o200k) == pytest.approx(1.4)
    assert ratio_of(stamp(900, 1000, o200k), o200k) == 1.0  # counts less: not used
    assert ratio_of(stamp(10**6, 10, o200k), o200k) == MAX_PROVIDER_RATIO
    for broken in (None, "x", {}, {"estimator": o200k.name}, stamp(5, 0, o200k)):
        assert ratio_of(broken, o200k) == 1.0
    assert json.loads(json.dumps(stamp(1400, 1000, o200k))) == stamp(1400, 1000, o200k)
