"""The usage record of a call the bound decided (R3): below T the middleware sends
the request without counting a history nothing counted before; when the model
reports usage, the estimate it is recorded and calibrated against is still the
exact count (made after the model call; off the event loop in async runs), equal
to what a middleware whose estimator declares no bound records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ars_core import CachingEstimator, FsspecBackend, SummaryConfig, TiktokenEstimator
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.helpers import Runner, build_agent

pytestmark = pytest.mark.spec("R1", "R3")

O200K = TiktokenEstimator()


class ExactOnly(CachingEstimator):
    """o200k counts with no bound declared (counted exactly, always)."""

    name = "exact-only"

    def count_text(self, text: str) -> int:
        return O200K.count_text(text)


@pytest.fixture(params=["sync", "async"])
def runner(request: pytest.FixtureRequest, tmp_path: Path) -> Runner:
    return Runner("memory", request.param, tmp_path, request)


def history() -> list[Any]:
    out: list[Any] = []
    for i in range(6):
        call = tool_call("echo", {"text": f'étape {i} 🙂 "quoted"\n'}, f"c{i}")
        out += [
            HumanMessage(f"request {i}: 表情と漢字 naïve café ✓", id=f"h{i}"),
            AIMessage("", tool_calls=[call], id=f"a{i}"),
            ToolMessage(f"result {i} 結果 " * 30, tool_call_id=f"c{i}", id=f"t{i}"),
        ]
    return out


def test_below_t_the_usage_is_recorded_against_the_exact_count(
    runner: Runner, tmp_path: Path
) -> None:
    usage = {"input_tokens": 2000, "output_tokens": 3, "total_tokens": 2003}
    records: list[list[dict[str, Any]]] = []
    estimators = [TiktokenEstimator(), ExactOnly()]
    for k, estimator in enumerate(estimators):
        seen: list[dict[str, Any]] = []
        model = FakeToolChatModel([AIMessage("done", id="answer", usage_metadata=usage)])
        mw = ArsSummarizationMiddleware(
            SummaryConfig(summary_threshold=1000),
            estimator=estimator,
            backend=FsspecBackend(f"memory://bounded-usage-{runner.mode}-{k}"),
            on_model_usage=seen.append,
            read_tool=False,
            stream=False,
        )
        result = runner.run(
            build_agent(model, mw), [{"messages": history()}], {"configurable": {"thread_id": "t"}}
        )
        assert result.runs[0].error is None
        records.append(seen)
    assert len(records[0]) == 1 and records[0] == records[1]
    assert records[0][0]["estimated_tokens"] > 18 * 10
    assert estimators[0].scale == estimators[1].scale != 1.0  # calibrated alike
