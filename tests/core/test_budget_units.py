"""Every budget of a call is in one unit: the estimator's (R21, R23, R3).

The configuration speaks provider tokens; an estimator with a safety margin (or a
calibrated scale) measures in its own units, and T and T2 are divided by that scale
once per call. The summary's bound, the kept tail's room and the task's room are
derived from those same scaled thresholds (``budget.in_estimate_units``), so no rule
subtracts a provider-token bound from an estimate-unit room.
"""

from __future__ import annotations

from typing import Any

import pytest

from ars_core import ApproxEstimator, Compressor, SummaryConfig, TiktokenEstimator
from ars_core.budget import estimate_scale, in_estimate_units, thresholds
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, call, tool, user, words

pytestmark = pytest.mark.spec("R21", "R23", "R3")

CONFIG = SummaryConfig(summary_threshold=8, summary_keep_messages=4)


class BoundRecorder(FakeSummarizer):
    """A fake summary model that records the bound each round gives it."""

    def __init__(self) -> None:
        super().__init__("the summary")
        self.bounds: list[int] = []

    def with_budget(self, summary_tokens: int) -> Any:
        self.bounds.append(summary_tokens)
        return self


def agent_run(turns: int) -> list[Any]:
    out = [user("TASK: make the parser accept empty input.")]
    for i in range(turns):
        c = call("bash", command=f"pytest -k case_{i}")
        out += [assistant(f"step {i}", c), tool(c, words(400, f"out{i}"))]
    return out


def test_the_scaled_configuration_holds_the_scaled_thresholds() -> None:
    """With the approx estimator's 15% margin, T, T2 and the default summary bound
    (T2, at most T/2) are the configured ones divided by 1.15; a configured
    ``summary_max_tokens`` is divided too; an exact estimator's scale is 1."""
    est = ApproxEstimator()
    scale = estimate_scale(est)
    assert scale == pytest.approx(1.15)
    scaled = in_estimate_units(CONFIG, est)
    assert (scaled.threshold_tokens, scaled.l2_threshold_tokens) == thresholds(CONFIG, est)
    assert scaled.summary_token_limit == scaled.l2_threshold_tokens == int(8_192 * 0.4 / scale)
    capped = in_estimate_units(SummaryConfig(summary_threshold=8, summary_max_tokens=1_150), est)
    assert capped.summary_max_tokens == 1_000
    assert in_estimate_units(CONFIG, TiktokenEstimator()) is CONFIG


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "fixed"])
def test_the_summary_bound_is_in_the_estimators_units(lean: bool) -> None:
    """The summarizer is bounded by the L2 threshold as the engine measures it (2,849
    estimate units with a 15% margin, not the configured 3,276 provider tokens), and
    the summary message it wrote fits that bound."""
    est = ApproxEstimator()
    config = CONFIG
    summarizer = BoundRecorder()
    engine = Compressor(config, estimator=est, summarizer=summarizer, lean_rounds=lean)
    out = engine.call(agent_run(30), ScriptedModel())
    assert out.level == "L2"
    (bound,) = summarizer.bounds
    t2 = thresholds(config, est)[1]
    assert bound <= t2 < config.l2_threshold_tokens
    if not lean:  # a fixed round's bound: the summary bound less the task the engine wrote
        limit = in_estimate_units(config, est).summary_token_limit
        assert limit == t2
        text = out.update.event.summary_message.text
        task = text[: text.index("⟦ARS⟧ Summary")].split("\n\n", 1)[1]
        assert task.startswith("⟦ARS⟧ Task\nTASK: make the parser")
        frame = est.count_text("⟦ARS⟧ Summary\n\n\n⟦ARS⟧ end of summary")  # around its text
        assert abs(bound - (limit - est.count_text(task) - frame)) <= 3
