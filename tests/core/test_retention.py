"""The retention audit: every L2 round checks the new view for what the agent needs (R58)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ars_core import (
    Compressor,
    Message,
    Retention,
    SummarizationEvent,
    audit_retention,
    task_retention,
    task_statement,
)
from ars_core.l2 import build_summary_message
from ars_core.retention import edited_files, error_lines
from ars_core.summary_text import parse_summary
from ars_core.testing import FakeSummarizer, ScriptedModel, capture_events

from .helpers import assistant, call, small_config, tool, user, words

TASK = "Fix the crash in parser.py when the input is empty; keep the public API unchanged."


def _history() -> list[Message]:
    """A task, an edit, a failing test run, a passing one, then the kept tail."""
    c1 = call("bash", "c1", command="cat > src/parser_fix.py <<'EOF'\nx = 1\nEOF")
    c2 = call("bash", "c2", command="python -m pytest tests/test_parser.py -q")
    c3 = call("edit_file", "c3", file_path="src/parser.py", old="a", new="b")
    c4 = call("bash", "c4", command="python -m pytest tests/test_parser.py -q -x")
    return [
        user(TASK),
        assistant("writing a fix", c1),
        tool(c1, "ok"),
        assistant("running the tests", c2),
        tool(c2, "E   ValueError: empty input\nFAILED tests/test_parser.py::test_empty"),
        assistant("editing", c3),
        tool(c3, "edited"),
        assistant("again", c4),
        tool(c4, "3 passed"),
        assistant("reviewing " + words(700, "review")),
        user("looks good, now also update the changelog"),
        assistant("done " + words(100, "tail")),
    ]


class TestMeasure:
    @pytest.mark.spec("R58")
    def test_task_retention_counts_the_words_a_view_holds(self) -> None:
        """Half the words of a 20-word task in the view: exactly 0.5."""
        task = " ".join(f"w{i}" for i in range(20))
        head = " ".join(f"w{i}" for i in range(10))
        assert task_retention(task, [Message(role="user", content=f"x {head} y")]) == 0.5
        assert task_retention(task, [Message(role="user", content=task)]) == 1.0
        assert task_retention(task, "unrelated text") == 0.0
        assert task_retention(["short one", task], f"short one\n{head}") == 12 / 22
        assert task_retention([], "anything") == 1.0

    @pytest.mark.spec("R58")
    def test_a_short_request_is_found_only_as_whole_words(self) -> None:
        """A request shorter than a run counts as kept where its words stand whole,
        not where they begin or end longer words."""
        assert task_retention("fix it", "Task:\nfix it\n") == 1.0
        assert task_retention("fix it", "fix it") == 1.0
        assert task_retention("fix it", "then prefix it and fix items") == 0.0
        assert task_retention("fix it", "we fix items; we fix it") == 1.0

    @pytest.mark.spec("R58")
    def test_a_collapsed_view_is_searched_for_a_request_only_where_it_can_stand(
        self,
    ) -> None:
        """In a view's collapsed text (single spaces only) a request holding other
        whitespace is not looked for verbatim (it cannot be there): the same shares as
        a text not said to be collapsed, with no such search."""
        from ars_core.retention import view_text
        from ars_core.text_pieces import LONG_PART

        searched: list[str] = []

        class Text(str):  # what is looked for in it: a part, or a long part's first characters
            def __contains__(self, part: object) -> bool:
                searched.append(str(part))
                return str.__contains__(self, part)

            def find(self, part: str, *args: Any) -> int:
                searched.append(part)
                return str.find(self, part, *args)

        body = " ".join(f"w{i}" for i in range(30))
        tasks = [
            f"Task:\n{body}",  # a line break: never verbatim in a collapsed text
            f"  {body}",  # two spaces
            f" {body} ",  # single spaces either side: may be verbatim
            body.replace("w7 ", "w7\u00a0"),  # another space character
            f"{body}\tend",
        ]
        views = [[Message(role="user", content=f"head\n\n{task}\n tail")] for task in tasks] + [
            [Message(role="user", content="x " + " ".join(f"w{i}" for i in range(12)))]
        ]
        for view in views:
            text = view_text(view)
            for task in [*tasks, *([t] for t in tasks), tasks]:
                searched.clear()
                fraction = task_retention(task, Text(text), collapsed=True)
                assert fraction == task_retention(task, str(text))
                assert fraction == task_retention(task, view)
                looked_for = [
                    t
                    for t in ([task] if isinstance(task, str) else task)
                    if t in searched or t[: LONG_PART // 2] in searched
                ]
                assert looked_for == [t for t in looked_for if t.strip(" ") == " ".join(t.split())]
                assert all("  " not in t for t in looked_for)
        searched.clear()
        task_retention(tasks[2], Text(view_text(views[2])), collapsed=True)
        assert tasks[2][: LONG_PART // 2] in searched  # single spaces only: looked for verbatim

    @pytest.mark.spec("R58")
    def test_anchors_of_a_history(self) -> None:
        history = _history()
        assert task_statement(history) == [TASK, "looks good, now also update the changelog"]
        assert edited_files(history) == ["src/parser_fix.py", "src/parser.py"]
        assert error_lines(history) == [
            "E ValueError: empty input",
            "FAILED tests/test_parser.py::test_empty",
        ]

    @pytest.mark.spec("R58")
    def test_audit_of_a_view_that_lost_everything(self) -> None:
        """A summary that says nothing useful: every anchor is missing, by name."""
        history = _history()
        summarized, tail = history[:9], history[9:]
        view = [build_summary_message("The agent worked.", cutoff=9, file_path=None), *tail]
        retention = audit_retention(summarized, view, task=[TASK])
        assert retention == Retention(
            found=(),
            missing=(
                "task",
                "file:src/parser_fix.py",
                "file:src/parser.py",
                "command:cat > src/parser_fix.py <<'EOF' x = 1 EOF",
                "command:python -m pytest tests/test_parser.py -q",
                "command:python -m pytest tests/test_parser.py -q -x",
                "error:E ValueError: empty input",
                "error:FAILED tests/test_parser.py::test_empty",
            ),
            task_fraction=0.0,
        )
        assert retention.to_dict() == {
            "found": [],
            "missing": list(retention.missing),
            "fraction": 0.0,
            "task_fraction": 0.0,
        }

    @pytest.mark.spec("R58")
    def test_a_kept_tool_result_whose_call_left_the_view_is_a_missing_id(self) -> None:
        c = call("bash", "c9", command="ls")
        view = [build_summary_message("S", cutoff=3, file_path=None), tool(c, "files")]
        retention = audit_retention([user("t")], view, task=[])
        assert retention.missing == ("id:c9",)
        assert audit_retention(
            [user("t")], [view[0], assistant("", c), view[1]], task=[]
        ).found == ("id:c9",)


def _l2(summarizer: object) -> tuple[Compressor, list[Message]]:
    # the summary bound of the fixed rounds (the L2 threshold): room for every anchor
    config = small_config(summary_keep_messages=3)
    # the summary model reads all of this short history (the default, what it keeps whole
    # + T/8, is 128 tokens beside the newest message here)
    return Compressor(config, summarizer=summarizer, summary_input_tokens=2048), _history()


class TestEveryL2Round:
    @pytest.mark.spec("R58", "R24", "R31")
    def test_extractive_summary_keeps_every_anchor_and_the_event_says_so(self) -> None:
        """The built-in summarizer: the task, files, commands and errors all survive."""
        engine, history = _l2(None)
        with capture_events() as events:
            out = engine.call(history, ScriptedModel())
        assert out.level == "L2" and out.update is not None
        retention = out.update.event.retention
        assert retention is not None
        assert retention.missing == ()
        assert retention.task_fraction == 1.0 and retention.fraction == 1.0
        assert "task" in retention.found and "file:src/parser.py" in retention.found
        completed = [e for e in events.events if e.phase == "completed"]
        assert [e.retention for e in completed] == [retention]
        assert completed[0].to_dict()["retention"] == retention.to_dict()

    @pytest.mark.spec("R58", "R60")
    def test_a_summary_that_leaves_the_task_out_cannot_lose_it(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The summarizer writes nothing of the task: the engine wrote it into the
        summary message, so the audit finds it whole and nothing warns."""
        engine, history = _l2(FakeSummarizer("The agent worked on something."))
        with caplog.at_level(logging.INFO, logger="ars"):
            out = engine.call(history, ScriptedModel())
        assert out.update is not None
        retention = out.update.event.retention
        assert retention is not None
        cut = out.update.event.cutoff
        assert retention == audit_retention(history[:cut], out.view, task=[TASK])
        assert "task" in retention.found and retention.task_fraction == 1.0
        assert dict(parse_summary(out.view[0].text))["Task"] == TASK
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []

    @pytest.mark.spec("R58")
    def test_what_only_the_archive_holds_is_an_info_line_not_a_warning(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A summary that states the task but names no file or command: the audit is in
        the event and one INFO line, in plain words; nothing is logged as a warning."""
        engine, history = _l2(FakeSummarizer(f"The user asked: {TASK} Work is under way."))
        with caplog.at_level(logging.INFO, logger="ars"):
            out = engine.call(history, ScriptedModel())
        assert out.update is not None
        retention = out.update.event.retention
        assert retention is not None and retention.task_fraction == 1.0 and retention.missing
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        (line,) = [r.getMessage() for r in caplog.records if "summary round" in r.getMessage()]
        total = len(retention.found) + len(retention.missing)
        assert line == (
            f"ARS: summary round: the view keeps {len(retention.found)} of {total} things "
            "the agent may need (100% of the task statement); only in the archived "
            f"history: {'; '.join(retention.missing)}"
        )
        assert "anchor" not in line

    @pytest.mark.spec("R58")
    @pytest.mark.anyio
    async def test_async_round_records_the_same_audit(self) -> None:
        engine, history = _l2(FakeSummarizer("The agent worked on something."))
        sync_out = engine.call(history, ScriptedModel())
        async_out = await engine.acall(history, ScriptedModel())
        assert sync_out.update is not None and async_out.update is not None
        assert async_out.update.event.retention == sync_out.update.event.retention

    @pytest.mark.spec("R58", "R24")
    def test_retention_survives_the_event_round_trip(self) -> None:
        engine, history = _l2(None)
        out = engine.call(history, ScriptedModel())
        assert out.update is not None
        event = out.update.event
        data = event.to_dict()
        assert data["retention"] == event.retention.to_dict()  # type: ignore[union-attr]
        assert SummarizationEvent.from_dict(data).retention == event.retention
        del data["retention"]  # events persisted before the audit existed still load
        assert SummarizationEvent.from_dict(data).retention is None


def _reading(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Message]]:
    """The messages each reader of the audit is asked about, by reader."""
    from ars_core import retention

    read: dict[str, list[Message]] = {}
    for name in ("_edited_in", "_commands_in", "_errors_in"):
        real, seen = getattr(retention, name), read.setdefault(name, [])
        monkeypatch.setattr(
            retention, name, lambda m, real=real, seen=seen: seen.append(m) or real(m)
        )
    return read


def _edits(start: int, n: int) -> list[Message]:
    """``n`` edits whose runs fail, numbered from ``start`` (an assistant call, a result)."""
    out: list[Message] = []
    for i in range(start, start + n):
        c = call("bash", f"ed{i}", command=f"echo x > src/mod{i}.py && python src/mod{i}.py")
        out += [assistant("", c), tool(c, f"Traceback\nValueError: bad value {i}")]
    return out


def _listings(n: int) -> list[Message]:
    """A long start: listings, no edit, no error."""
    out: list[Message] = []
    for i in range(n):
        c = call("bash", f"ls{i}", command=f"ls dir{i}")
        out += [assistant("", c), tool(c, f"file{i}.txt")]
    return out


@pytest.mark.spec("R58")
def test_the_audit_reads_back_only_as_far_as_its_newest_anchors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The audit checks the newest 20 edited files, 3 commands and 3 errors. A history
    no earlier round read is read from its newest message back, each reader no further
    than its anchors take (the 20th file, the 3rd command, the 3rd error line): the
    long start is never read. The anchors are those a full reading finds. A grown or
    an edited history is read the same way, where what each message holds is already
    known only its new messages are read."""
    from ars_core import retention

    history = [user(TASK), *_listings(200), *_edits(0, 25)]
    view = [Message(role="user", content="summary"), *history[-4:]]
    read = _reading(monkeypatch)
    result = audit_retention(history[:-4], view, task=[TASK])
    summarized = history[:-4]  # edits 0..22; edit i's call is message 401 + 2 i
    newest_first = summarized[::-1]
    # files: back to edit 3's call; commands: to edit 20's; errors: edit 21's result
    assert read == {
        "_edited_in": newest_first[:40],
        "_commands_in": newest_first[:6],
        "_errors_in": newest_first[:3],
    }
    files = edited_files(history[:-4])[-20:]  # what a full reading finds
    errors = error_lines(history[:-4])[-3:]
    assert files == [f"src/mod{i}.py" for i in range(3, 23)]
    assert errors == ["ValueError: bad value 21", "Traceback", "ValueError: bad value 22"]
    anchors = [*result.found, *result.missing]
    assert sorted(a for a in anchors if a.startswith("file:")) == sorted(f"file:{p}" for p in files)
    assert sorted(a for a in anchors if a.startswith("error:")) == sorted(
        f"error:{e}" for e in errors
    )
    assert "error:Traceback" in result.found  # the kept tail shows one
    # the next round summarizes two more messages: only they are read (by each reader)
    for seen in read.values():
        seen.clear()
    grown = audit_retention(history[:-2], [view[0], *history[-2:]], task=[TASK])
    assert "file:src/mod23.py" in [*grown.found, *grown.missing]
    assert "file:src/mod3.py" not in [*grown.found, *grown.missing]
    assert read == {name: history[-3:-5:-1] for name in read}
    # an edited history (a message replaced in the middle, never reached): nothing to
    # read, the same result
    for seen in read.values():
        seen.clear()
    edited = [*history[:100], user("an edited message"), *history[101:-4]]
    assert audit_retention(edited, view, task=[TASK]) == result
    assert read == {name: [] for name in read}
    # what a message's tool calls write and run is parsed once: a later audit over the
    # same messages finds the same anchors without parsing any call again
    parsed: list[Message] = []
    for name in ("_find_edited", "_find_commands"):
        real = getattr(retention, name)
        monkeypatch.setattr(retention, name, lambda m, real=real: parsed.append(m) or real(m))
    assert audit_retention(history[:-4], view, task=[TASK]) == result
    assert parsed == []


@pytest.mark.spec("R58")
def test_a_history_read_to_its_start_is_then_read_only_where_it_grew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fewer edited files than the audit checks: the first audit reads every message
    for them (and keeps that reading); the audit of the history grown by one more edit
    reads only the two new messages for its files, and finds every file a full reading
    finds."""
    history = [user(TASK), *_listings(100), *_edits(0, 5)]
    view = [Message(role="user", content="summary"), *history[-2:]]
    read = _reading(monkeypatch)
    first = audit_retention(history[:-2], view, task=[TASK])
    assert read["_edited_in"] == history[:-2][::-1]
    assert sorted(a for a in first.missing if a.startswith("file:")) == [
        f"file:src/mod{i}.py" for i in range(4)
    ]
    read["_edited_in"].clear()
    grown = history + _edits(5, 1)
    result = audit_retention(grown[:-2], [view[0], *grown[-2:]], task=[TASK])
    assert read["_edited_in"] == grown[-4:-2]
    files = [a for a in [*result.found, *result.missing] if a.startswith("file:")]
    assert sorted(files) == sorted(f"file:{p}" for p in edited_files(grown[:-2]))
    assert len(files) == 5


def _reference_task_retention(task: list[str], text: str) -> float:
    """The measure worked out directly: every run of 5 task words looked for in the
    view's words, each word of a found run kept."""
    view_words = text.split()
    view_runs = {tuple(view_words[i : i + 5]) for i in range(len(view_words) - 4)}
    kept = total = 0
    for t in task:
        w = t.split()
        total += len(w)
        if len(w) < 5:
            kept += len(w) if " ".join(w) in text else 0
            continue
        covered = [False] * len(w)
        for i in range(len(w) - 4):
            if tuple(w[i : i + 5]) in view_runs:
                covered[i : i + 5] = [True] * 5
        kept += sum(covered)
    return kept / total if total else 1.0


@pytest.mark.spec("R58")
def test_task_retention_over_rounds_equals_the_direct_measure() -> None:
    """The task's runs are indexed once and the last coverage is reused while the
    view finds the same runs: round after round (same view, a view holding more of
    the task, one holding less, a partial-word match that must not count), the
    share equals the direct word-run measure."""
    long_task = " ".join(f"w{i % 37} x{i}" for i in range(300))
    boiler = "please follow the repository rules and run the tests before you finish"
    task = [long_task, boiler, "short ask", boiler + " twice " + boiler]
    half = " ".join(long_task.split()[:150])
    views = [
        f"summary: {half}\n{boiler}",
        f"summary: {half}\n{boiler}",  # the same runs again: the kept coverage
        f"summary: {long_task} short ask",
        "summary: nothing of it",
        f"summary: {half[:-1]}\n{boiler}",  # the last word cut: its runs no longer match
        f"summary: {half}\n{boiler}",
    ]
    got = [task_retention(task, v) for v in views]
    want = [_reference_task_retention(task, " ".join(v.split())) for v in views]
    assert got == want
    assert got[0] == got[1] and got[2] > got[0] > got[4] and got[3] == 0.0


@pytest.mark.spec("R58")
def test_error_lines_are_found_once_per_tool_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each tool result's error lines are found once and kept on it: reading the same
    results again (the audit and the summary input's note of a later round) scans only
    new or edited results, with the same lines as a first read."""
    from ars_core import retention

    scanned: list[str] = []
    find = retention._find_errors

    def spy(text: str) -> tuple[str, ...]:
        scanned.append(text)
        return find(text)

    monkeypatch.setattr(retention, "_find_errors", spy)
    history = _history()
    first = error_lines(history)
    tools = [m.text for m in history if m.role == "tool"]
    assert scanned == tools
    scanned.clear()
    assert error_lines(history) == first and scanned == []
    c = call("bash", "c9", command="make")
    edited = [*history, tool(c, "make: *** [all] Error 2")]
    assert error_lines(edited) == [*first, "make: *** [all] Error 2"]
    assert scanned == ["make: *** [all] Error 2"]
    assert first == ["E ValueError: empty input", "FAILED tests/test_parser.py::test_empty"]


@pytest.mark.spec("R58")
def test_error_lines_are_every_line_that_reports_an_error() -> None:
    """A tool result's error lines are each of its lines (as ``str.splitlines`` splits
    it: ``\\r\\n``, ``\\r``, ``\\u2028`` too) that holds an error marker, in order,
    however the markers sit: several in one line or stretch, at its start or end,
    none at all."""
    import re

    marker = re.compile(r"Traceback|Error\b|Exception\b|error:|\bfailed\b|FAILED|No such file")
    texts = [
        "all good\nnothing here\n",
        "Error",
        "\nError\n\n",
        "ok\r\nValueError: bad value\r\nfine\r\n",
        "a\rTypeError here\rb failed c\r",
        "x\u2028Error y\u2029z\n failed",
        "Errors are not errors\nErrorX\nan error: found\n2 failed, 3 FAILED\n",
        "Traceback (most recent call last):\n  File 'x'\nKeyError: 'k'\nNo such file or dir",
        "refailed failedly\nfailed\n",
    ]
    for text in texts:
        c = call("bash")
        history = [assistant("", c), tool(c, text)]
        expected = [" ".join(line.split()) for line in text.splitlines() if marker.search(line)]
        got = error_lines(history)
        assert got == list(dict.fromkeys(reversed(expected)))[::-1], (text, got)


@pytest.mark.spec("R58")
@pytest.mark.parametrize("n_steps", [3, 40, 200])
@pytest.mark.parametrize("last", [1, 3, 8, 50])
def test_the_latest_items_are_those_of_the_whole_history(n_steps: int, last: int) -> None:
    """The latest ``last`` files edited and error lines, read from the newest messages
    first (a long history is not read whole when they are found there), are the last
    ``last`` of what the whole history holds, ordered by where each occurs last:
    errors and edits sparse or frequent, repeated or not, early or late."""
    history: list = [user("fix the build")]
    for i in range(n_steps):
        edit = i % 7 == 0 or i < 3
        c = (
            call("write_file", path=f"src/m{i % 11}.py", content="x = 1")
            if edit
            else call("bash", command=f"make target{i} > out/{i % 5}.log")
        )
        text = f"line {i}\nERROR: failed step {i % 13}\n" if i % 9 == 0 else f"ok {i}"
        history += [assistant(f"step {i}", c), tool(c, text)]
    for reader in (edited_files, error_lines):
        whole = reader(history)
        assert reader(history, last=last) == whole[-last:]


@pytest.mark.spec("R58")
def test_the_latest_items_of_a_growing_history_are_kept_in_order_of_their_last_place() -> None:
    """Round after round the audit asks for the latest items of a history that grew:
    the order kept for it takes only the new messages' items, and gives what a full
    reading of each history gives (items repeated, moved to their new last place); a
    shorter history, one edited in the middle and one grown again answer the same."""
    history: list = [user("fix the build")]
    for i in range(60):
        c = (
            call("write_file", path=f"src/m{i % 4}.py", content="x = 1")
            if i % 3
            else call("bash", command=f"make t{i % 5} > out/{i % 2}.log")
        )
        text = f"ERROR: failed step {i % 3}\n" if i % 4 == 0 else f"ok {i}"
        history += [assistant(f"step {i}", c), tool(c, text)]
    edited = [*history[:30], user("an edited message"), *history[31:]]
    lengths = [*range(1, len(history) + 1, 3), 40, 90, len(history)]
    for messages in (history, edited, history):
        for n in lengths:
            for reader in (edited_files, error_lines):
                whole = reader(messages[:n])
                for last in (1, 3, 20):
                    assert reader(messages[:n], last=last) == whole[-last:], (n, reader, last)
    # two readers of one history, each round to its own length (the audit's part, a
    # note's longer one): each answer is the full reading's
    for n in range(20, len(history) - 7):
        for part in (history[: n + 7], history[:n]):
            assert edited_files(part, last=3) == edited_files(part)[-3:], n


@pytest.mark.spec("R58")
def test_a_request_held_whole_is_kept_without_the_view_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request over several lines that the view holds whole (the summary's task
    section; the view's text collapses whitespace) counts whole without the view's
    word runs being made; a request whose first word is found only inside a longer
    word (a partial-word match) is measured run by run. Every share equals the direct word-run measure."""
    from ars_core import retention

    request = "Fix the parser:\n  it crashes on empty input.\n\nKeep the API as it is, please."
    other = "then update the changelog with a short note about it"
    made: list[int] = []
    real_runs = retention._runs
    monkeypatch.setattr(retention, "_runs", lambda w: made.append(len(w)) or real_runs(w))
    held = f"summary\n\n{request}\n\n{other}\n\ndone"
    assert task_retention([request, other], "nothing of it") == 0.0  # the requests indexed
    made.clear()
    assert task_retention([request, other], held) == 1.0
    assert made == []  # each request held whole: no run of the view was needed
    glued = f"summary x{request}\n{other} done"  # its first word fused to another
    views = [held, glued, f"summary {request}", "Fix the parser: it crashes"]
    for view in views:
        text = " ".join(view.split())
        assert task_retention([request, other], text) == _reference_task_retention(
            [request, other], text
        )
    assert made  # the partial-word view was measured run by run


@pytest.mark.spec("R58")
def test_a_request_is_indexed_once_whichever_request_comes_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The task keeps its first request while its newest changes, round after round:
    each request's word runs are made once (not the first request's again for every
    new newest request), and every share equals the direct word-run measure."""
    from ars_core import memo, retention

    first = " ".join(f"w{i % 37} x{i}" for i in range(300))
    newest = [f"now do step {k} of the plan and report back" for k in range(3)]
    indexed: list[str] = []
    real = retention._TaskIndex.__init__

    def recording(self: object, task: str) -> None:
        indexed.append(task)
        real(self, task)  # type: ignore[arg-type]

    monkeypatch.setattr(retention._TaskIndex, "__init__", recording)
    view = " ".join(first.split()[:120]) + " now do step 1 of the plan"
    with memo.active(memo.Memo()):
        for request in [*newest, newest[0]]:
            share = task_retention([first, request], view)
            assert share == _reference_task_retention([first, request], view)
    assert indexed == [first, *newest]


@pytest.mark.spec("R58")
def test_a_view_text_reads_each_kept_message_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A view's text is every message's text and tool-call arguments, whitespace
    collapsed, as one text (the direct reading); the next round's view, holding most
    of the same messages, reads only its new ones."""
    import json

    from ars_core import memo, retention

    def direct(view: list[Message]) -> str:
        chunks: list[str] = []
        for m in view:
            chunks.append(m.text)
            for c in m.tool_calls:
                chunks.append(c.name)
                chunks += [v if isinstance(v, str) else json.dumps(v) for v in c.args.values()]
        return " ".join("\n".join(chunks).split())

    c = call("edit_file", "e1", file_path="src/a.py", edits=[{"old": "x", "new": "y  z"}])
    history = [
        user("  fix   the\nparser  "),
        assistant("", c),
        tool(c, "edited\n\n  ok"),
        assistant("   "),
        *[assistant(f"step {i}\twith  tabs") for i in range(6)],
    ]
    read: list[Message] = []
    real = retention._message_text
    monkeypatch.setattr(retention, "_message_text", lambda m: read.append(m) or real(m))
    with memo.active(memo.Memo()):
        last = 0
        for end in (6, 7, 10):
            view = [user("summary of it all"), *history[end - 6 : end]]  # a new summary each
            read.clear()
            assert retention.view_text(view) == direct(view)
            assert read == [view[0], *history[max(last, end - 6) : end]]
            last = end
