"""The built-in extractive summarizer keeps the task (R23, R41).

The task is every user request, whole while the task budget allows; chained
summaries read ARS's own sections back by markers the task cannot contain;
the task budget follows the summary budget; repeated tool calls are counted.
"""

from __future__ import annotations

import pytest

from ars_core import Compressor, Message, SummaryConfig
from ars_core.estimate import ApproxEstimator
from ars_core.l2 import build_summary_message
from ars_core.retention import task_retention
from ars_core.summarize import (
    REQUEST_ELIDED,
    SECTION_MARK,
    TASK_SHARE,
    ExtractiveSummarizer,
    condense_history,
    parse_summary,
    summary_budget,
)
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, call, tool, user, words

EST = ApproxEstimator()
PROMPT = "{messages}"

MARKDOWN_TASK = "\n".join(
    [
        "# Crash when saving a model",
        "",
        "## Steps to reproduce",
        "1. create `app/models.py` with a `Thing` model",
        "2. run `python manage.py migrate`",
        "",
        "## Files touched",
        "- this list is part of the task, not ARS's section",
        "",
        f"{SECTION_MARK} end of summary",
        f"\\{SECTION_MARK} an already escaped line",
        "",
        "## Expected behaviour",
        "The model saves. " + words(60, "expected"),
        "",
        "## Instructions",
        "Edit non-test files only; keep the public API.",
    ]
)


def _sections(text: str) -> dict[str, str]:
    return dict(parse_summary(text))


def _task_sections(text: str) -> list[str]:
    """The bodies of the task sections of a summary, in order."""
    return [body for header, body in parse_summary(text) if header.startswith("Task")]


class TestTaskStatement:
    @pytest.mark.spec("R23")
    def test_real_request_after_a_demonstration_is_in_the_summary(self) -> None:
        """A run that opens with a worked example keeps the real request, not only the example."""
        demo = user("Here is an example task and its solution:\n## Example\nfix foo.py by ...")
        c = call("bash", "c1", command="cat foo.py")
        real = user("Now the real task: make `parse()` accept empty input.")
        history = [demo, assistant("ok", c), tool(c, "def foo(): ..."), real, assistant("on it")]
        text = ExtractiveSummarizer().summarize(history, PROMPT).text
        sections = _sections(text)
        assert sections["Task, user request 1 of 2"] == demo.text
        assert sections["Task, user request 2 of 2"] == real.text

    @pytest.mark.spec("R23")
    def test_tool_results_and_ars_notes_are_not_requests(self) -> None:
        """Only what the user wrote is the task: tool output in a user turn and ARS's notes are not."""
        from ars_core.messages import ContentPart
        from ars_core.retention import MARK_NOTE, task_statement

        task = user("the task")
        tool_turn = Message(
            role="user", content=(ContentPart(type="tool_result", data={"content": "x"}),)
        )
        note = Message(role="user", content="[3 older messages omitted]", metadata={MARK_NOTE: 1})
        lc_summary = Message(
            role="user", content="a LangChain summary", metadata={"lc_source": "summarization"}
        )
        assert task_statement([task, tool_turn, note, lc_summary, user("the task")]) == ["the task"]

    @pytest.mark.spec("R23", "R25")
    def test_chained_summary_keeps_a_markdown_task_exactly(self) -> None:
        """Headings, bullet lists and even ARS's marker inside the task never end the task."""
        c = call("bash", "c1", command="pytest -q")
        first = ExtractiveSummarizer().summarize(
            [user(MARKDOWN_TASK), assistant("running", c), tool(c, "1 failed")], PROMPT
        )
        summary = build_summary_message(first.text, cutoff=3, file_path="h.jsonl")
        c2 = call("bash", "c2", command="pytest -q")
        second = ExtractiveSummarizer().summarize(
            [summary, assistant("again", c2), tool(c2, "1 passed")], PROMPT
        )
        third = ExtractiveSummarizer().summarize(
            [build_summary_message(second.text, cutoff=5, file_path=None), assistant("done")],
            PROMPT,
        )
        for text in (first.text, second.text, third.text):
            assert _sections(text)["Task"] == MARKDOWN_TASK
        assert _sections(third.text)["Tool calls (latest)"] == "- bash: pytest -q (×2)"

    @pytest.mark.spec("R23")
    def test_a_long_markdown_task_survives_a_second_summary_whole(self) -> None:
        """A 24,794-character task full of headings is read back whole (not cut at a heading)."""
        block = "\n".join(ln for ln in MARKDOWN_TASK.split("\n") if SECTION_MARK not in ln)
        task = (block + "\n\n") * (24_794 // (len(block) + 2))
        task = (task + "x" * 24_794)[:24_794]
        budget = summary_budget(SummaryConfig(summary_threshold=32))
        extractive = ExtractiveSummarizer(summary_tokens=budget)
        first = extractive.summarize([user(task), assistant("reading")], PROMPT).text
        summary = build_summary_message(first, cutoff=2, file_path=None)
        second = extractive.summarize([summary, assistant("next")], PROMPT).text
        assert _sections(second)["Task"] == task
        assert task_retention(task, [Message(role="user", content=second)]) == 1.0

    @pytest.mark.spec("R23")
    def test_legacy_summary_layout_is_still_read(self) -> None:
        """A summary persisted by an older ARS (``## `` sections) keeps its task on the next round."""
        legacy = "## Task\nfix the parser\n\n## Tool calls (latest)\n- bash: ls"
        summary = build_summary_message(legacy, cutoff=4, file_path=None)
        text = ExtractiveSummarizer().summarize([summary, assistant("more")], PROMPT).text
        assert _sections(text)["Task"] == "fix the parser"
        assert _sections(text)["Tool calls (latest)"] == "- bash: ls"

    @pytest.mark.spec("R23")
    def test_a_model_written_previous_summary_is_carried_not_dropped(self) -> None:
        """A previous summary without ARS's sections (a model wrote it) is kept as text."""
        summary = build_summary_message("The user wants X; Y is done.", cutoff=4, file_path=None)
        text = ExtractiveSummarizer().summarize([summary, assistant("more")], PROMPT).text
        assert "The user wants X; Y is done." in _sections(text)["Earlier summary"]


class TestTaskBudget:
    @pytest.mark.spec("R23")
    def test_task_budget_follows_the_summary_budget(self) -> None:
        """The same 20,000-character task is whole under a large budget, head and tail under a
        small one, and never clipped at a fixed 3,000 characters."""
        task = "START " + words(5000, "body") + " THE END"
        assert len(task) > 20_000
        history = [user(task), assistant("ok")]
        big = ExtractiveSummarizer(summary_tokens=16_000).summarize(history, PROMPT).text
        assert _sections(big)["Task"] == task
        small = ExtractiveSummarizer(summary_tokens=2_000).summarize(history, PROMPT).text
        kept = _sections(small)["Task"]
        assert kept.startswith("START context") and kept.endswith("THE END")
        assert REQUEST_ELIDED in kept  # how much, and where the whole is
        assert EST.count_text(kept) <= 2_000 * TASK_SHARE
        assert EST.count_text(kept) >= 2_000 * TASK_SHARE * 0.9

    @pytest.mark.spec("R23")
    def test_requests_share_the_task_budget_small_ones_whole(self) -> None:
        """Short requests stay whole; the long ones share what is left, head and tail each."""
        short = user("also: keep the CLI flags")
        long_a = user("A-START " + words(3000, "aaa") + " A-END")
        long_b = user("B-START " + words(3000, "bbb") + " B-END")
        text = (  # three requests and no tool call read as a chat: the agent mode is asked for
            ExtractiveSummarizer(summary_tokens=2_000, mode="agent")
            .summarize([long_a, short, long_b, assistant("ok")], PROMPT)
            .text
        )
        s = _sections(text)
        assert s["Task, user request 2 of 3"] == short.text
        a, b = s["Task, user request 1 of 3"], s["Task, user request 3 of 3"]
        assert a.startswith("A-START") and a.endswith("A-END")
        assert b.startswith("B-START") and b.endswith("B-END")
        assert abs(EST.count_text(a) - EST.count_text(b)) < 30

    @pytest.mark.spec("R23")
    def test_engine_gives_its_summarizer_the_summary_budget(self) -> None:
        """The engine's default summarizer keeps a 12,000-character task whole at T = 8K
        (its summary budget is T/2; the old constant clipped tasks at 3,000 characters)."""
        task = "TASK-HEAD " + words(1800, "req") + " TASK-TAIL"
        assert len(task) > 12_000
        state = [user(task)] + [
            m for i in range(12) for m in (user(f"step {i}"), assistant(words(600, f"a{i}")))
        ]
        config = SummaryConfig(summary_threshold=8, summary_keep_messages=4)
        out = Compressor(config).call(state, ScriptedModel())
        assert out.level == "L2" and out.update.event.cutoff == 21  # keep 4 is honored
        summary = out.update.event.summary_message.text
        assert _task_sections(summary)[0] == task

    @pytest.mark.spec("R41")
    def test_fallback_after_a_failing_summary_model_keeps_the_task(self) -> None:
        """When the summary model raises, the fallback summary holds the task whole (13
        requests and no tool call: a chat, whose summary keeps the first and the newest)."""
        task = "TASK-HEAD " + words(1800, "req") + " TASK-TAIL"
        state = [user(task)] + [
            m for i in range(12) for m in (user(f"step {i}"), assistant(words(600, f"a{i}")))
        ]
        config = SummaryConfig(summary_threshold=8, summary_keep_messages=4)
        failing = FakeSummarizer(error=RuntimeError("down"))
        out = Compressor(config, summarizer=failing).call(state, ScriptedModel())
        assert out.update.event.cutoff == 21  # keep 4 is honored
        summary = out.update.event.summary_message.text
        assert "[ARS: the summary model failed: RuntimeError: down]" in summary
        assert _task_sections(summary)[0] == task


class TestToolCalls:
    @pytest.mark.spec("R23")
    def test_repeated_identical_tool_calls_are_listed_once_with_a_count(self) -> None:
        history: list[Message] = [user("fix it")]
        for i, cmd in enumerate(["ls", "pytest -q", "ls", "pytest -q", "pytest -q", "git diff"]):
            c = call("bash", f"c{i}", command=cmd)
            history += [assistant("", c), tool(c, "ok")]
        text = ExtractiveSummarizer().summarize(history, PROMPT).text
        assert _sections(text)["Tool calls (latest)"] == (
            "- bash: ls (×2)\n- bash: pytest -q (×3)\n- bash: git diff"
        )

    @pytest.mark.spec("R23")
    def test_files_created_or_edited_are_listed_apart(self) -> None:
        c1 = call("bash", "c1", command="cat <<'EOF' > src/new_mod.py\nx = 1\nEOF")
        c2 = call("edit_file", "c2", file_path="src/app.py", old="a", new="b")
        c3 = call("bash", "c3", command="sed -i 's/a/b/' lib/util.py && cat docs/readme.md")
        history = [user("t"), assistant("", c1, c2, c3)]
        history += [tool(c, "ok") for c in (c1, c2, c3)]
        s = _sections(ExtractiveSummarizer().summarize(history, PROMPT).text)
        assert s["Files created or edited"] == "- src/new_mod.py\n- src/app.py\n- lib/util.py"
        assert s["Files touched"] == "- docs/readme.md"


class TestSummaryInput:
    @pytest.mark.spec("R23")
    @pytest.mark.spec("R59")
    def test_condensed_input_keeps_the_task_requests(self) -> None:
        """The summary model reads the requests that set the work (the first and the one
        sent right after it) and the newest request whole; a request in the middle is
        conversation content, left out with the oldest of it."""
        first = user("FIRST " + words(200, "first"))
        also = user("ALSO " + words(100, "also"))
        middle = [assistant(words(400, f"m{i}")) for i in range(20)]
        aside = user("ASIDE " + words(200, "aside"))
        msgs = [first, also, *middle[:10], aside, *middle[10:], user("latest")]
        out = condense_history(msgs, 2000, EST)
        assert out[:2] == [first, also] and out[-1] == msgs[-1] and aside not in out
        assert sum(EST.count_message(m) for m in out) <= 2000


class TestMedia:
    @pytest.mark.spec("R23")
    def test_images_reach_the_summary_prompt_as_references_never_base64(self) -> None:
        """A URL or path is named; inline data is described by its size, not copied."""
        from ars_core.messages import ContentPart, from_openai
        from ars_core.summarize import render_history

        inline = "data:image/png;base64," + "A" * 5000
        message = from_openai(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is in these?"},
                    {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
                    {"type": "image_url", "image_url": {"url": inline}},
                ],
            }
        )
        lc_block = Message(
            role="user",
            content=(
                ContentPart(type="image", data={"type": "image", "url": "/srv/uploads/b.jpg"}),
                ContentPart(
                    type="image",
                    data={"type": "image", "base64": "B" * 300, "mime_type": "image/jpeg"},
                ),
            ),
        )
        assert render_history([message, lc_block]) == (
            "[user]\nwhat is in these?\n[image: https://example.org/a.png]\n"
            "[image: inline image/png data, 5,022 characters, not shown]\n\n"
            "[user]\n[image: /srv/uploads/b.jpg]\n"
            "[image: inline image/jpeg data, 300 characters, not shown]"
        )


class TestAnotherHarnessSummary:
    """A summary another harness inserted (LangChain marks its own with ``lc_source``)
    is an earlier summary to build on: a history summarized by LangChain's middleware
    and then handed to ARS keeps what that summary said."""

    @pytest.mark.spec("R23", "R25")
    def test_the_next_summary_keeps_a_langchain_summarys_task_and_text(self) -> None:
        first = ExtractiveSummarizer().summarize(
            [user("Fix the parser bug in foo.py"), assistant("looking")], PROMPT
        )
        marked = Message(
            role="user",
            content=f"Here is a summary of the conversation to date:\n\n{first.text}",
            metadata={"lc_source": "summarization"},
        )
        plain = Message(
            role="user",
            content="The billing database moved to the new cluster on Monday.",
            metadata={"langchain": {"additional_kwargs": {"lc_source": "summarization"}}},
        )
        c = call("bash", "c1", command="pytest -q")
        for earlier, kept in ((marked, "Fix the parser bug in foo.py"), (plain, plain.text)):
            text = (
                ExtractiveSummarizer()
                .summarize([earlier, assistant("again", c), tool(c, "1 passed")], PROMPT)
                .text
            )
            assert kept in text
            assert "Here is a summary" not in _sections(text).get("Task", "")

    @pytest.mark.spec("R23")
    def test_the_summary_input_keeps_a_langchain_summary_whole(self) -> None:
        """``condense_history`` keeps it whole, like ARS's own previous summary, while
        the other older messages give way to the budget."""
        earlier = Message(
            role="user", content=words(300, "said"), metadata={"lc_source": "summarization"}
        )
        history = [earlier, *[assistant(words(200, f"step{i}")) for i in range(6)], user("go")]
        condensed = condense_history(history, budget=400, estimator=ApproxEstimator())
        assert condensed[0] is earlier
        assert len(condensed) < len(history)


@pytest.mark.spec("R3", "R23")
@pytest.mark.parametrize("share", [0.3, 0.9, 1.1, 2.0, 3.5])
def test_whether_a_history_exceeds_a_limit_reads_only_what_was_appended(
    monkeypatch: pytest.MonkeyPatch, share: float
) -> None:
    """Whether a growing history (a third of its messages counted, as a cold round
    leaves them) is above a limit is the exact total's answer, call after call. When
    the counts its messages hold pass the limit, a call on the history grown by two
    messages reads the held counts of those two only, and no message is counted."""
    from ars_core import memo
    from ars_core.estimate import TiktokenEstimator
    from ars_core.summarize import history_exceeds

    def agent_run(n: int) -> list[Message]:
        out = [user("fix the parser " + words(40, "task"))]
        for i in range(n):
            c = call("bash", f"c{i}", command=f"pytest -k case_{i}")
            out += [assistant(f"step {i}", c), tool(c, words(30 + i % 7 * 20, f"out{i}"))]
        return out

    est = TiktokenEstimator()
    history = agent_run(60)
    grown = [*history, *agent_run(61)[-2:]]
    for m in history[::3]:
        est.count_message(m)
    sizes = [TiktokenEstimator().count_message(m) for m in agent_run(61)]  # equal, other objects
    held = sum(sizes[: len(history) : 3])
    limit = int(held * share)
    read: list[int] = []
    real = memo.Family.get_many
    monkeypatch.setattr(
        memo.Family, "get_many", lambda self, ms, key: read.append(len(ms)) or real(self, ms, key)
    )
    counted = [est.cache_key in m._cache for m in grown]
    with memo.active(memo.Memo()):
        assert history_exceeds(history, est, limit) == (sum(sizes[: len(history)]) > limit)
        read.clear()
        assert history_exceeds(grown, est, limit) == (sum(sizes) > limit)
    if held > limit:
        assert read == [2]
        assert [est.cache_key in m._cache for m in grown] == counted


@pytest.mark.spec("R3", "R23")
def test_a_history_measured_by_estimators_in_turn_answers_for_each() -> None:
    """One history asked about by estimators in turn (two that count differently, and
    new estimator objects of a class whose counts are their own): each answer is that
    estimator's exact total's, and the engine keeps one record of the counts held,
    not one per estimator."""
    from ars_core import memo
    from ars_core.estimate import CachingEstimator, TiktokenEstimator
    from ars_core.summarize import history_exceeds

    class Own(CachingEstimator):  # counts of its own: a key per estimator object
        def count_text(self, text: str) -> int:
            return len(text)

    history = [user("fix the parser " + words(40, "task"))]
    history += [assistant(f"step {i} " + words(20 + i, f"s{i}")) for i in range(30)]
    engine_memo = memo.Memo()
    with memo.active(engine_memo):
        o200k = TiktokenEstimator()
        for i in range(12):
            est = (o200k, EST, Own())[i % 3]
            for m in history[i % 2 :: 2]:
                est.count_message(m)
            total = sum(est.count_message(m) for m in history)
            for limit in (total // 3, total - 1, total):
                assert history_exceeds(history, est, limit) == (total > limit)
    assert list(engine_memo._prefixes) == ["summarize:held"]
