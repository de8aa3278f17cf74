"""The replay report carries the last summary the summarizer wrote (``last_summary``),
so a replay with a real summary model shows what that model said."""

from __future__ import annotations

import pytest

from ars_core import FsspecBackend, Message, SummaryConfig
from ars_core.cli.report import format_report
from ars_core.replay import replay_messages, total_report
from ars_core.testing import FakeSummarizer

CONFIG = SummaryConfig(summary_threshold=0.5, summary_keep_messages=2, summary_l2_trigger_ratio=0.5)


def chat(turns: int) -> list[Message]:
    messages = [Message(role="system", content="You are helpful.")]
    for i in range(turns):
        messages.append(Message(role="user", content=f"turn {i}: " + "alpha beta gamma " * 60))
        messages.append(Message(role="assistant", content=f"answer {i}"))
    return messages


def report_text(reports: list[object]) -> str:
    return format_report(
        reports,  # type: ignore[arg-type]
        total_report(reports),  # type: ignore[arg-type]
        config=CONFIG, estimator="approx", summarizer="fake", out="out/", samples=False,
    )  # fmt: skip


@pytest.mark.spec("R23")
def test_replay_report_ends_with_the_last_summary_of_each_run() -> None:
    """Every L2 round calls the summarizer; ``last_summary`` is the text of the last
    call, and the text report prints it after the totals."""
    texts = iter(["first summary", "second summary", "third summary", "fourth summary"])
    summarizer = FakeSummarizer(text=lambda rendered: next(texts))
    report = replay_messages(
        chat(6), config=CONFIG, summarizer=summarizer, backend=FsspecBackend("memory://replay-last"),
        name="demo",
    )  # fmt: skip
    assert report.l2_rounds >= 2 and report.summary_calls == len(summarizer.calls)
    expected = ["first summary", "second summary", "third summary", "fourth summary"]
    assert report.last_summary == expected[report.summary_calls - 1]
    assert report.to_dict()["last_summary"] == report.last_summary
    assert report_text([report]).splitlines()[-1] == f"Last summary of demo: {report.last_summary}"


def test_replay_without_a_summary_has_no_last_summary_line() -> None:
    """A run that never reaches L2 has ``last_summary`` None and no such line."""
    report = replay_messages(chat(1), config=CONFIG, backend=FsspecBackend("memory://replay-none"))
    assert report.summary_calls == 0 and report.last_summary is None
    assert "Last summary of" not in report_text([report])


def test_last_summary_with_a_lone_surrogate_is_escaped() -> None:
    """A summary holding a lone surrogate (any ``str`` can) is reported escaped, so the
    report (text or JSON) can be written to a UTF-8 stream."""
    summarizer = FakeSummarizer(text="kept \ud83d as is")
    report = replay_messages(
        chat(6), config=CONFIG, summarizer=summarizer, backend=FsspecBackend("memory://replay-sur")
    )
    assert report.last_summary == "kept \\ud83d as is"
    line = report_text([report]).splitlines()[-1]
    assert line == "Last summary of run: kept \\ud83d as is"
    line.encode("utf-8")
