"""The engine writes the summary's task section; the summarizer writes the rest (R60).

Whatever summarizer runs — the extractive one, a model, a failed one and its
fallback, one with a custom prompt — the summary message holds the task the
engine wrote (the request(s) that set the work and the newest request,
verbatim; head and tail of each with a marker when they do not fit), and the
summarizer is told the task is kept beside its summary: it is bounded by what
the task leaves and is never asked to write it out again. What the summary
call is measured as is what the summarizer itself read and wrote.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ars_core import ApproxEstimator, Compressor, Message, SummaryConfig
from ars_core.budget import in_estimate_units
from ars_core.summarize import REQUEST_ELIDED, ExtractiveSummarizer, parse_summary
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, call, memory_backend, small_config, tool, user, words

EST = ApproxEstimator()
TASK = "Fix the crash in parser.py when the input is empty; keep the public API."
OPENING = "Summary of the earlier conversation (messages 1-{}; they are no longer shown):"

MODES = pytest.mark.parametrize("mode", ["sync", "async"])
#: ``summary_max_tokens=600`` in the approx estimator's units (the engine's, with its margin)
LIMIT_600 = in_estimate_units(SummaryConfig(summary_max_tokens=600), EST).summary_token_limit
#: what the engine puts around a model's text: its header and the end mark
FRAME = EST.count_text("⟦ARS⟧ Summary\n\n\n⟦ARS⟧ end of summary")


def agent_run(turns: int = 10, *, task: str = TASK) -> list[Message]:
    out = [user(task)]
    for i in range(turns):
        c = call("bash", f"c{i}", command=f"pytest -q -k case_{i}")
        out += [assistant(f"step {i}", c), tool(c, words(100, f"out{i}"))]
    return out


def run(mode: str, engine: Compressor, state: list[Message]) -> Any:
    if mode == "sync":
        return engine.call(state, ScriptedModel(estimator=EST))

    async def go() -> Any:
        return await engine.acall(state, ScriptedModel(estimator=EST).acall)

    return anyio.run(go)


def engine(summarizer: Any = None, **config: Any) -> Compressor:
    """Fixed rounds (the latest ``keep`` kept, the summary bound of the config) at T = 1K."""
    return Compressor(
        small_config(**config),
        estimator=EST,
        backend=memory_backend(),
        summarizer=summarizer,
        lean_rounds=False,
    )


def saved(event: Any) -> str:
    return f"\n\nThe full text of those messages is saved at {event.file_path}."


@pytest.mark.spec("R60", "R23", "R24")
@MODES
def test_the_extractive_summary_message_is_the_engines_task_then_the_rest(mode: str) -> None:
    """The default summarizer writes no task section: the message is the frame, the
    task the engine wrote, then the summarizer's sections; the summary call's output
    is measured as what the summarizer wrote (the task not in it)."""
    out = run(mode, engine(summary_keep_messages=4), agent_run())
    assert out.level == "L2"
    event = out.update.event
    rest = (
        "⟦ARS⟧ Tool calls (latest)\n"
        + "\n".join(f"- bash: pytest -q -k case_{i}" for i in range(2, 8))
        + "\n\n⟦ARS⟧ Latest conclusions\n- step 5\n- step 6\n- step 7\n\n⟦ARS⟧ end of summary"
    )
    assert event.summary_message.text == (
        f"{OPENING.format(17)}\n\n⟦ARS⟧ Task\n{TASK}\n\n{rest}{saved(event)}"
    )
    assert event.summary_usage.output_tokens == EST.count_text(rest)
    assert out.view[0] == event.summary_message


@pytest.mark.spec("R60", "R23", "R24")
@MODES
def test_a_model_summarizer_is_not_asked_for_the_task_and_is_bounded_by_what_it_leaves(
    mode: str,
) -> None:
    """A model's prompt says the requests are kept verbatim beside the summary and not
    to restate them; its bound is the summary bound less the task section; its text
    follows the task under its own header (the bound leaves room for that header and
    the end mark too)."""
    fake = FakeSummarizer("The agent ran the case tests; case 7 still fails.")
    out = run(mode, engine(fake, summary_keep_messages=4, summary_max_tokens=600), agent_run())
    event = out.update.event
    ((history, prompt),) = fake.calls
    assert history[0].text == TASK  # it reads the task, to understand the work
    assert "kept verbatim beside your summary: do not restate them" in prompt
    assert "original request" not in prompt
    task = f"⟦ARS⟧ Task\n{TASK}"
    bound = fake.bounds[-1]  # (async: asked once for each method it might call)
    assert set(fake.bounds) == {bound}
    assert abs(bound - (LIMIT_600 - EST.count_text(task + "\n\n") - FRAME)) <= 2
    assert event.summary_message.text == (
        f"{OPENING.format(17)}\n\n{task}\n\n⟦ARS⟧ Summary\n"
        f"The agent ran the case tests; case 7 still fails.\n\n⟦ARS⟧ end of summary{saved(event)}"
    )


@pytest.mark.spec("R60", "R23")
def test_a_custom_prompt_still_gets_the_task_written_beside_the_summary() -> None:
    fake = FakeSummarizer("short summary")
    custom = "Summarize briefly:\n{messages}"
    out = run("sync", engine(fake, summary_keep_messages=4, summary_prompt=custom), agent_run())
    assert fake.calls[0][1] == custom
    assert dict(parse_summary(out.update.event.summary_message.text))["Task"] == TASK


@pytest.mark.spec("R60", "R41")
@MODES
def test_a_failed_summary_keeps_the_engines_task_and_the_fallback_writes_the_rest(
    mode: str,
) -> None:
    failing = FakeSummarizer(error=RuntimeError("down"))
    out = run(mode, engine(failing, summary_keep_messages=4), agent_run())
    event = out.update.event
    text = event.summary_message.text
    assert event.summary_error == "RuntimeError: down"
    assert text.startswith(
        f"{OPENING.format(17)}\n\n[ARS: the summary model failed: RuntimeError: down]\n\n"
        f"⟦ARS⟧ Task\n{TASK}\n\n⟦ARS⟧ Tool calls (latest)\n"
    )
    assert [h for h, _ in parse_summary(text)] == [
        "Task",
        "Tool calls (latest)",
        "Latest conclusions",
    ]


@pytest.mark.spec("R60", "R23")
def test_first_and_newest_requests_larger_than_their_room_keep_head_and_tail() -> None:
    """Two large requests (the first, and the newest summarized) and one in between,
    under a summary bound of 600: the task sections are the first and the newest, each
    head and tail around the marker; the one in between is listed as another request;
    the summarizer is bounded by what they leave."""
    first = "FIRST-HEAD " + words(1500, "first") + " FIRST-TAIL"
    middle = "MIDDLE also keep the CLI flags"
    newest = "NEWEST-HEAD " + words(1500, "newest") + " NEWEST-TAIL"
    state = [*agent_run(2, task=first), user(middle), *agent_run(2, task=newest)]
    state += [assistant(words(150, f"b{i}")) for i in range(4)]
    fake = FakeSummarizer("progress")
    out = run("sync", engine(fake, summary_keep_messages=3, summary_max_tokens=600), state)
    event = out.update.event
    sections = parse_summary(event.summary_message.text)
    assert [h for h, _ in sections] == [
        "Task, user request 1 of 2",
        "Task, user request 2 of 2",
        "Summary",
    ]
    for (_, body), request in zip(sections, (first, newest), strict=False):
        assert body.startswith(request[:40]) and body.endswith(request[-40:])
        assert REQUEST_ELIDED in body and len(body) < len(request)
    task = event.summary_message.text.split("\n\n⟦ARS⟧ Summary")[0].split("\n\n", 1)[1]
    assert EST.count_text(task) <= LIMIT_600 * 3 // 4  # its share, the headers included
    (bound,) = fake.bounds
    assert abs(bound - (LIMIT_600 - EST.count_text(task + "\n\n") - FRAME)) <= 4
    extractive = ExtractiveSummarizer(mode="agent").with_budget(600, task=[first, newest])
    rest = extractive.summarize(state[: event.cutoff], "{messages}").text
    assert dict(parse_summary(rest))["Other user requests"] == f"- {middle}"
    assert not any(h.startswith("Task") for h, _ in parse_summary(rest))


@pytest.mark.spec("R60", "R25")
def test_an_earlier_summarys_task_is_merged_into_the_engines() -> None:
    """A history that opens with another harness's summary (LangChain's marker) whose
    task is in ``## `` sections: the engine's task is that task, then this history's
    requests; the summary's own sections are carried on by the extractive summarizer."""
    earlier = Message(
        role="user",
        content="Here is a summary of the conversation to date:\n\n"
        "## Task\nfix the parser\n\n## Decisions\n- parse with a regex",
        metadata={"lc_source": "summarization"},
    )
    state = [earlier, *agent_run(10, task="now add tests for empty input")]
    out = run("sync", engine(summary_keep_messages=4), state)
    sections = dict(parse_summary(out.update.event.summary_message.text))
    assert sections["Task, user request 1 of 2"] == "fix the parser"
    assert sections["Task, user request 2 of 2"] == "now add tests for empty input"
    assert sections["Decisions"] == "- parse with a regex"


@pytest.mark.spec("R60", "R25")
@MODES
def test_a_chained_round_keeps_the_first_request_and_the_newest(mode: str) -> None:
    """Two rounds with a new request between them: the second summary's task is the
    first request and the newest one; the request the first summary held as its newest
    is listed among the other requests (not dropped, not in the task)."""
    state = agent_run(5) + agent_run(5, task="ALSO: run the linter")
    compressor = engine(summary_keep_messages=4)
    first = run(mode, compressor, state)
    sections = dict(parse_summary(first.update.event.summary_message.text))
    assert sections["Task, user request 1 of 2"] == TASK
    assert sections["Task, user request 2 of 2"] == "ALSO: run the linter"
    state += [*agent_run(10, task="NOW: update the changelog"), assistant(words(40, "end"))]
    if mode == "sync":
        second = compressor.call(state, ScriptedModel(estimator=EST), event=first.update.event)
    else:

        async def go() -> Any:
            model = ScriptedModel(estimator=EST)
            return await compressor.acall(state, model.acall, event=first.update.event)

        second = anyio.run(go)
    sections = dict(parse_summary(second.update.event.summary_message.text))
    assert sections["Task, user request 1 of 2"] == TASK
    assert sections["Task, user request 2 of 2"] == "NOW: update the changelog"
    assert sections["Other user requests"] == "- ALSO: run the linter"


@pytest.mark.spec("R60", "R59")
def test_a_chats_task_is_its_first_and_newest_message_written_by_the_engine() -> None:
    """A chat through the engine: the task sections are the first and the newest user
    message; what was said in between is the conversation section."""
    chat: list[Message] = []
    for day in range(1, 9):
        chat += [
            user(f"[{day} May, 2023] Ana: On day {day} I paid {day * 10} euros for lesson {day}."),
            assistant(f"[{day} May, 2023] Ben: I will meet Carla at {day} pm, table {day}."),
            assistant(f"[{day} May, 2023] Ben: " + words(60, f"b{day}")),
        ]
    chat.append(user("[9 May, 2023] Ana: What did I pay on day 2?"))
    out = run("sync", engine(summary_keep_messages=4), chat)
    event = out.update.event
    sections = parse_summary(event.summary_message.text)
    assert [h for h, _ in sections][:2] == [
        "Task, user request 1 of 2",
        "Task, user request 2 of 2",
    ]
    assert sections[0][1] == chat[0].text
    newest = [m.text for m in chat[: event.cutoff] if m.role == "user"][-1]
    assert sections[1][1] == newest
    assert sections[2][0].startswith("Conversation")
