"""The default estimator decides right: exact o200k when tiktoken is installed,
the approximate count otherwise, and a safety margin keeps requests under T."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ars_core import (
    ApproxEstimator,
    Compressor,
    Message,
    SummaryConfig,
    TiktokenEstimator,
    default_estimator,
    read_messages,
)
from ars_core.replay import replay_messages
from ars_core.testing import RecordingEmitter, ScriptedModel

from .helpers import small_config, user, words


def without_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken -> ImportError


@pytest.mark.spec("R3", "R57")
class TestDefaultSelection:
    def test_default_is_exact_o200k_when_tiktoken_is_installed(self) -> None:
        est = Compressor().estimator
        assert isinstance(est, TiktokenEstimator) and est.name == "tiktoken:o200k_base"
        assert est.margin == 0.0
        assert est.count_text("hello world") == 2

    def test_default_is_approx_without_tiktoken(self, monkeypatch: pytest.MonkeyPatch) -> None:
        without_tiktoken(monkeypatch)
        assert type(default_estimator()) is ApproxEstimator
        est = Compressor().estimator
        assert type(est) is ApproxEstimator and est.margin == ApproxEstimator.error_margin > 0


def state_of(tokens: int) -> list[Message]:
    """One user message the approximate estimator puts at about ``tokens``."""
    return [user(words(tokens - 8))]


@pytest.mark.spec("R1", "R2", "R57")
class TestSafetyMargin:
    def test_margin_lowers_the_entry_threshold(self) -> None:
        """Estimated at ~95% of T: below T, but inside the approx margin -> a round starts."""
        est = ApproxEstimator()
        state = state_of(975)
        assert 1024 / (1 + est.margin) < est.count(state) < 1024
        emitter = RecordingEmitter()
        Compressor(small_config(), estimator=est, emitter=emitter).call(state, ScriptedModel())
        assert emitter.phases[0] == ("started", "L1")

        exact = ApproxEstimator()
        exact.margin = 0.0  # an estimator known to be exact keeps no margin
        emitter = RecordingEmitter()
        model = ScriptedModel()
        Compressor(small_config(), estimator=exact, emitter=emitter).call(state, model)
        assert emitter.events == [] and model.calls == [state]

    def test_calibration_narrows_the_margin(self) -> None:
        """Provider usage that agrees with the estimate narrows the margin: the same
        request no longer starts a round. Usage that disagrees widens it."""
        est = ApproxEstimator()
        for estimated in (3000, 5000, 8000):
            est.calibrate(estimated=estimated, actual=int(estimated * 1.005))
        assert est.margin == pytest.approx(0.02)
        state = state_of(975)
        assert 1024 / 1.15 < est.count(state) < 1024 / (est.scale * (1 + est.margin))
        emitter, model = RecordingEmitter(), ScriptedModel()
        Compressor(small_config(), estimator=est, emitter=emitter).call(state, model)
        assert emitter.events == [] and model.calls == [state]

        wider = ApproxEstimator()
        for estimated in (3000, 5000, 8000):
            wider.calibrate(estimated=estimated, actual=int(estimated * 1.3))
        assert wider.margin > ApproxEstimator.error_margin

    def test_calibration_needs_a_few_reports_before_replacing_the_measured_margin(self) -> None:
        est = ApproxEstimator()
        est.calibrate(estimated=1000, actual=1000)
        est.calibrate(estimated=1000, actual=1000)
        assert est.margin == ApproxEstimator.error_margin


def longest_runs(trajectories_dir: Path, n: int) -> list[list[Message]]:
    runs = [read_messages(p) for p in sorted(trajectories_dir.glob("*.jsonl.gz"))]
    return sorted(runs, key=lambda msgs: -sum(len(m.text) for m in msgs))[:n]


@pytest.mark.spec("R57", "R22")
@pytest.mark.parametrize("tiktoken_installed", [True, False], ids=["tiktoken", "no-tiktoken"])
@pytest.mark.parametrize("k", [8, 16, 32])
def test_default_configuration_sends_nothing_above_t_in_o200k(
    trajectories_dir: Path, monkeypatch: pytest.MonkeyPatch, tiktoken_installed: bool, k: int
) -> None:
    """The longest shared runs replayed at T = 8K, 16K and 32K with the defaults: every
    request sent (system + view), counted in o200k, is at most T."""
    o200k = TiktokenEstimator("o200k_base")
    if not tiktoken_installed:
        without_tiktoken(monkeypatch)
    sent: list[int] = []
    for run in longest_runs(trajectories_dir, 4):
        replay_messages(
            run,
            config=SummaryConfig(summary_threshold=k),
            on_call=lambda outcome, system: sent.append(
                o200k.count(list(outcome.view), system=system)
            ),
        )
    assert len(sent) > 100 and max(sent) > 0.75 * k * 1024  # the runs do reach T
    assert max(sent) <= k * 1024
