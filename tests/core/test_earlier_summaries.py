"""An earlier summary is merged into the next one, whoever wrote it (R60).

ARS's own sections go back into the lists; a model's ``## `` sections and its
prose are carried on as they are; the archive files earlier summaries name are
listed, so the next summary still says where every summarized message is. Before
this, a summary a model wrote in ``## `` sections was dropped without a word by
the fallback after a failed summary call: the first request, the decisions and
the archive path were lost.
"""

from __future__ import annotations

import pytest

from ars_core import Compressor, FsspecBackend, Message, SummaryConfig
from ars_core.l2 import build_summary_message
from ars_core.summarize import ExtractiveSummarizer, parse_summary
from ars_core.summary_text import read_earlier
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, call, tool, user, words

PROMPT = "{messages}"
PATH1 = "outputs/conversation_history/history-000000-000017-1111111111111111.jsonl"

#: what a summary model writes: markdown sections of its own choosing
MODEL_SUMMARY = "\n".join(
    [
        "## User's request",
        "Build a CLI that archives the logs of every service nightly.",
        "",
        "## Decisions",
        "- use click for the CLI",
        "- archives go to /srv/archive/logs",
        "",
        "## Progress",
        "The archive command is written; tests pass.",
    ]
)


@pytest.mark.spec("R60", "R25")
def test_a_markdown_summary_is_merged_into_the_next_one() -> None:
    earlier = build_summary_message(MODEL_SUMMARY, cutoff=17, file_path=PATH1)
    c = call("bash", "c1", command="pytest -q tests/test_cli.py")
    history = [earlier, assistant("Running the tests.", c), tool(c, "3 passed"), assistant("Done.")]
    text = ExtractiveSummarizer().summarize(history, PROMPT).text
    assert text == (
        "⟦ARS⟧ User's request\n"
        "Build a CLI that archives the logs of every service nightly.\n\n"
        "⟦ARS⟧ Decisions\n"
        "- use click for the CLI\n"
        "- archives go to /srv/archive/logs\n\n"
        "⟦ARS⟧ Progress\n"
        "The archive command is written; tests pass.\n\n"
        "⟦ARS⟧ Earlier messages are saved at\n"
        f"- messages 1-17: {PATH1}\n\n"
        "⟦ARS⟧ Files touched\n"
        "- tests/test_cli.py\n\n"
        "⟦ARS⟧ Tool calls (latest)\n"
        "- bash: pytest -q tests/test_cli.py\n\n"
        "⟦ARS⟧ Latest conclusions\n"
        "- Running the tests.\n"
        "- Done.\n\n"
        "⟦ARS⟧ end of summary"
    )


@pytest.mark.spec("R60")
def test_the_archive_list_is_carried_through_every_round() -> None:
    """Each round's archive holds only the messages since the previous cutoff; the
    summaries list every earlier file with its range, oldest first."""
    first = build_summary_message(MODEL_SUMMARY, cutoff=17, file_path=PATH1)
    second_text = ExtractiveSummarizer().summarize([first, assistant("more")], PROMPT).text
    path2 = "outputs/conversation_history/history-000017-000030-2222222222222222.jsonl"
    second = build_summary_message(second_text, cutoff=30, file_path=path2)
    third = ExtractiveSummarizer().summarize([second, assistant("and more")], PROMPT).text
    assert dict(parse_summary(third))["Earlier messages are saved at"] == (
        f"- messages 1-17: {PATH1}\n- messages 18-30: {path2}"
    )
    assert dict(parse_summary(third))["Decisions"] == (
        "- use click for the CLI\n- archives go to /srv/archive/logs"
    )
    assert read_earlier(second).archives == [(17, PATH1), (30, path2)]


@pytest.mark.spec("R60", "R41")
def test_the_fallback_after_a_failed_summary_call_keeps_the_models_earlier_summary() -> None:
    """Round 1: the summary model writes markdown. Round 2: it fails; the fallback
    summary still holds the first request, the decisions and round 1's archive."""
    answers = [MODEL_SUMMARY]

    def model_summary(rendered: str) -> str:
        if answers:
            return answers.pop()
        raise RuntimeError("summary service down")

    engine = Compressor(
        SummaryConfig(summary_threshold=1, summary_keep_messages=2, summary_l2_trigger_ratio=0.5),
        backend=FsspecBackend("memory://earlier-md"),
        summarizer=FakeSummarizer(model_summary),
    )
    state: list[Message] = [user("Build a CLI that archives the logs of every service nightly.")]
    events = []
    event = None
    for i in range(40):
        c = call("bash", f"c{i}", command=f"python -m archiver --step {i}")
        state += [assistant(f"step {i}", c), tool(c, words(40, f"out{i}"))]
        out = engine.call(state, ScriptedModel(), event=event)
        if out.update is not None and out.update.event is not None:
            event = out.update.event
            events.append(event)
        if len(events) == 2:
            break
    first, second = events
    assert first.summary_error is None and second.summary_error is not None
    text = second.summary_message.text
    assert "[ARS: the summary model failed: RuntimeError: summary service down]" in text
    sections = dict(parse_summary(text.split("\n\n", 2)[2]))
    assert sections["User's request"] == (
        "Build a CLI that archives the logs of every service nightly."
    )
    assert sections["Decisions"] == "- use click for the CLI\n- archives go to /srv/archive/logs"
    assert sections["Progress"] == "The archive command is written; tests pass."
    assert sections["Earlier messages are saved at"] == (
        f"- messages 1-{first.cutoff}: {first.file_path}"
    )
    assert text.endswith(f"The full text of those messages is saved at {second.file_path}.")


@pytest.mark.spec("R60")
def test_the_archive_list_stays_small_over_many_rounds() -> None:
    """The first file and the three newest are named; the files between are one entry
    with their range and count (their names hold their ranges)."""
    text, paths = "", []
    for r in range(1, 8):
        path = f"outputs/conversation_history/history-{10 * (r - 1):06d}-{10 * r:06d}-h{r}.jsonl"
        paths.append(path)
        earlier = build_summary_message(text or MODEL_SUMMARY, cutoff=10 * r, file_path=path)
        text = ExtractiveSummarizer().summarize([earlier, assistant(f"round {r}")], PROMPT).text
    assert dict(parse_summary(text))["Earlier messages are saved at"] == "\n".join(
        [
            f"- messages 1-10: {paths[0]}",
            "- messages 11-40: 3 more files in the same folder",
            f"- messages 41-50: {paths[4]}",
            f"- messages 51-60: {paths[5]}",
            f"- messages 61-70: {paths[6]}",
        ]
    )
