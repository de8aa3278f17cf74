"""The summary message fits its bound, its task and the summarizer's text included.

The engine writes the task sections (their headers included in the task's room,
as the budget sizes it) and the summarizer writes the rest under a ``Summary``
header closed by the end mark; the summarizer is told the bound less all of
that, keeps at least :func:`~ars_core.budget.rest_floor` of the bound (at a tiny
bound the task's middle is left out sooner), and its text is cut further when
the counted parts and the whole differ. Properties over bounds, task sizes and
summary lengths: the body of the summary message (what the bound is on: the
frame's opening line and archive sentence are sized apart, as fixed) never
exceeds the bound; the first and the newest requests always have their sections.
"""

from __future__ import annotations

import logging
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ars_core import ApproxEstimator, Compressor, Message, SummaryConfig
from ars_core.budget import (
    SUMMARY_REST_FLOOR,
    in_estimate_units,
    rest_floor,
    summary_budget,
    task_budget,
    task_share,
)
from ars_core.l2 import validate_summary
from ars_core.summary_text import SUMMARY_HEADER, end_mark, parse_summary, section, summary_body
from ars_core.task_text import (
    fitted_summary,
    summarizer_limit,
    summary_task,
    task_requests,
    whole_task_tokens,
)
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, call, memory_backend, small_config, tool, user, words

EST = ApproxEstimator()
FRAME = EST.count_text(f"{section(SUMMARY_HEADER, '')}\n\n{end_mark()}")
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def body_of(message: Message) -> str:
    """The summary message's body: the task sections and the summarizer's part."""
    text = message.text.split("\n\n", 1)[1]
    return re.sub(r"\n\nThe full text of those messages is saved at [^\n]*$", "", text)


def requests_of(sizes: list[int]) -> list[str]:
    return [f"REQ{i}-HEAD " + words(n, f"r{i}") + f" REQ{i}-TAIL" for i, n in enumerate(sizes)]


@pytest.mark.spec("R59", "R60", "R54")
@PROPERTY
@given(
    bound=st.integers(64, 8192),
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=3),
    written=st.integers(1, 4000),
    own_room=st.booleans(),
)
def test_task_header_and_text_never_exceed_the_bound(
    bound: int, sizes: list[int], written: int, own_room: bool
) -> None:
    """Any task (one to three requests of up to 3,000 words), a summarizer writing up
    to 4,000 words, any bound from 64 tokens: task sections + summary header + text +
    cut marker + end mark fit the bound whenever the task's room holds the requests'
    smallest form (which 64 tokens a request and 64 more always do); every request
    keeps its section (never dropped, even in a room too small for it); the
    summarizer keeps its floor."""
    texts = requests_of(sizes)
    history = [user(t) for t in texts]
    tokens = whole_task_tokens(task_requests(history, texts), EST)
    config = SummaryConfig(summary_threshold=bound * 4 / 1024)
    room = (task_budget(config, bound, tokens) if own_room else None) or task_share(bound)
    task = summary_task(history, texts, room, EST)
    assert room <= bound - rest_floor(bound)
    if bound >= 64 * (len(texts) + 1):  # a room that holds the requests' smallest form
        assert task.fits
    assert task.fits == (task.tokens <= room)
    limit = summarizer_limit(bound, task, EST)
    assert limit >= min(SUMMARY_REST_FLOOR, bound // 2) - FRAME if task.fits else bound // 8
    checked = fitted_summary(words(written, "said"), task, bound, EST)
    assert checked.text and checked.text.strip()
    body = summary_body(task.sections, checked.text)
    if task.fits:
        assert EST.count_text(body) <= bound
    headers = [h for h, _ in parse_summary(body)]
    assert headers == [*task_headers(len(texts)), SUMMARY_HEADER]  # no request dropped


def task_headers(n: int) -> list[str]:
    return ["Task"] if n == 1 else [f"Task, user request {i} of {n}" for i in range(1, n + 1)]


@pytest.mark.spec("R60")
def test_a_task_the_budget_sized_whole_is_kept_whole() -> None:
    """The budget grows a summary for a task whose sections (headers included) do
    not fit their share; the task text then keeps every request whole in that room."""
    texts = requests_of([2000, 1800])
    history = [user(t) for t in texts]
    tokens = whole_task_tokens(task_requests(history, texts), EST)
    config = SummaryConfig(summary_threshold=8)
    bound = summary_budget(config, tokens, fixed_tokens=200)
    room = task_budget(config, bound, tokens)
    assert room == tokens > task_share(bound)
    task = summary_task(history, texts, room, EST)
    assert [body for _, body in parse_summary("\n\n".join(task.sections))] == texts
    assert task.tokens == tokens


def agent_run(task: str, turns: int = 10) -> list[Message]:
    out = [user(task)]
    for i in range(turns):
        c = call("bash", f"c{i}", command=f"pytest -q -k case_{i}")
        out += [assistant(f"step {i}", c), tool(c, words(100, f"out{i}"))]
    return out


@pytest.mark.spec("R59", "R60", "R54")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    most=st.integers(100, 2000),
    first=st.integers(1, 1500),
    newest=st.integers(1, 1500),
    written=st.integers(1, 1500),
    lean=st.booleans(),
)
def test_the_engines_summary_message_fits_its_bound(
    most: int, first: int, newest: int, written: int, lean: bool
) -> None:
    """Through the engine (``summary_max_tokens`` sets the bound; fixed and lean
    rounds; a model writing up to 1,500 words): the summary message's body fits the
    bound (at bounds with room for the two requests' smallest form), with the first
    and the newest request's sections and the model's text (cut or whole) under its
    header."""
    one, two = requests_of([first, newest])
    state = [*agent_run(one, 4), *agent_run(two, 4), assistant(words(30, "end"))]
    fake = FakeSummarizer(words(written, "model"), estimator=EST)
    engine = Compressor(
        small_config(summary_max_tokens=most, summary_threshold=16),
        estimator=EST,
        backend=memory_backend(),
        summarizer=fake,
        lean_rounds=lean,
    )
    out = engine.call(state, ScriptedModel(estimator=EST), requested=True)
    assert out.level == "L2"
    bound = in_estimate_units(SummaryConfig(summary_max_tokens=most), EST).summary_token_limit
    body = body_of(out.update.event.summary_message)
    if bound >= 192:  # room for the two requests' smallest form
        assert EST.count_text(body) <= bound
    sections = parse_summary(body)
    assert [h for h, _ in sections] == [
        "Task, user request 1 of 2",
        "Task, user request 2 of 2",
        SUMMARY_HEADER,
    ]
    assert sections[0][1].startswith("REQ0-HEAD") and sections[1][1].startswith("REQ1-HEAD")


@pytest.mark.spec("R59", "R60")
def test_at_t_256_a_small_models_two_sentences_stay_whole_beside_the_task() -> None:
    """T = 256 (the real-model e2e configuration), two 80-token requests: the summary
    bound (grown for the task) keeps the summarizer's floor, so a 30-token summary is
    not cut; the task sections keep the head and tail of both requests; the body
    fits the bound the summarizer's limit was taken from."""
    reply = (
        "Alice fixed the login bug in release 4.2 and Bob scheduled the database "
        "upgrade for Friday; the backup took forty minutes."
    )
    config = SummaryConfig(
        summary_threshold=0.25, summary_keep_messages=2, summary_l2_trigger_ratio=0.5
    )
    fake = FakeSummarizer(reply, estimator=EST)
    engine = Compressor(config, estimator=EST, backend=memory_backend(), summarizer=fake)
    notes = [
        f"Turn {i}. Please remember these notes.\n"
        + "\n".join(f"Note {i}.{k}: on day {i * 10 + k} " + words(9, f"n{i}{k}") for k in range(4))
        for i in range(3)
    ]
    state = [Message(role="system", content="You are a helpful assistant.")]
    for note in notes:
        state += [user(note), assistant("Noted.")]
    out = engine.call(state[:-1], ScriptedModel(estimator=EST))
    assert out.level == "L2"
    text = out.update.event.summary_message.text
    assert reply in text and "[ARS: this summary was cut" not in text
    sections = parse_summary(text)
    assert [h for h, _ in sections] == [
        "Task, user request 1 of 2",
        "Task, user request 2 of 2",
        SUMMARY_HEADER,
    ]
    assert sections[0][1].startswith("Turn 0.") and sections[1][1].startswith("Turn 1.")
    (limit,) = set(fake.bounds)
    assert EST.count_text(reply) <= limit
    task = "\n\n".join(f"⟦ARS⟧ {h}\n{b}" for h, b in sections[:2]) + "\n\n"
    assert EST.count_text(body_of(out.update.event.summary_message)) <= (
        limit + EST.count_text(task) + FRAME
    )


class TestACutSummaryIsNeverEmpty:
    """``validate_summary`` at limits smaller than its cut marker (about 20 tokens)."""

    TEXT = "The agent fixed the parser and the tests pass. " * 40

    @pytest.mark.spec("R54")
    def test_a_limit_with_room_for_the_marker_keeps_head_and_marker(self) -> None:
        checked = validate_summary(self.TEXT, limit=40, estimator=EST)
        assert checked.text is not None
        head, marker = checked.text.split("\n[ARS: this summary was cut to 40 tokens;")
        assert head and self.TEXT.startswith(head) and marker.endswith("]")
        assert EST.count_text(checked.text) <= 40 and checked.cut_from == EST.count_text(self.TEXT)

    @pytest.mark.spec("R54")
    @pytest.mark.parametrize("limit", [5, 10, 15])
    def test_a_limit_smaller_than_the_marker_keeps_the_head_and_an_ellipsis(
        self, limit: int, caplog: pytest.LogCaptureFixture
    ) -> None:
        with caplog.at_level(logging.WARNING, logger="ars"):
            checked = validate_summary(self.TEXT, limit=limit, estimator=EST)
        assert checked.text is not None and checked.text.endswith("…")
        head = checked.text[:-1]
        assert head.strip() and self.TEXT.startswith(head)
        assert EST.count_text(checked.text) <= limit
        assert checked.cut_from == EST.count_text(self.TEXT)
        assert f"more than the {limit} allowed; cut to fit" in caplog.text

    @pytest.mark.spec("R54")
    @pytest.mark.parametrize("limit", [-3, 0, 1])
    def test_a_limit_of_a_token_or_none_keeps_the_first_token(self, limit: int) -> None:
        checked = validate_summary(self.TEXT, limit=limit, estimator=EST)
        assert checked.text is not None and checked.text.strip()
        assert self.TEXT.startswith(checked.text) and EST.count_text(checked.text) == 1


@pytest.mark.spec("R54", "R60")
@pytest.mark.parametrize("bound", [200, 2000])
def test_a_summary_body_is_counted_once_per_engine(bound: int) -> None:
    """Round after round the task sections and the summarizer's text come back: the
    engine counts a summary message's body once (its memo keeps the count) and fits
    the summary as an engine that never saw it does (cut at a small bound, whole at a
    large one), and as before."""
    from ars_core import memo

    from .test_summary_and_rounds import TextRecordingEstimator

    texts = requests_of([300, 40])
    history = [user(t) for t in texts]
    est = TextRecordingEstimator()
    task = summary_task(history, texts, bound // 2, est)
    summary = words(120, "said")
    with memo.active(memo.Memo()):
        first = fitted_summary(summary, task, bound, est)
        body = summary_body(task.sections, first.text or "")
        assert body in est.texts
        est.texts.clear()
        again = fitted_summary(summary, task, bound, est)
        assert body not in est.texts
    with memo.active(memo.Memo()):
        fresh = fitted_summary(summary, task, bound, TextRecordingEstimator())
    assert again == first == fresh
    assert (first.cut_from is None) == (bound == 2000)
    assert EST.count_text(body) <= bound


@pytest.mark.spec("R54")
def test_a_summary_cut_twice_to_fit_its_bound_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At T = 256 (the default exact estimator) a 60-word summary is cut to what the task
    leaves, then once more because the body counted whole is a token or two over the bound:
    one warning, naming the limit the summary message's marker names."""
    rng = random.Random(9)
    greek = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"
    vocabulary = [*greek.split(), "pi", "rho", "sigma"]

    def text(n: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(n))

    sizes = [rng.choice([5, 30, 80]) for _ in range(3)]
    summary = text(rng.choice([40, 60, 150]))
    history: list[Message] = []
    for size in sizes:
        history += [user(text(size)), assistant(text(30))]
    history.append(user("go on"))
    engine = Compressor(
        SummaryConfig(summary_threshold=0.25, summary_keep_messages=2),
        backend=memory_backend(),
        summarizer=FakeSummarizer(summary),
    )
    with caplog.at_level(logging.WARNING, logger="ars"):
        out = engine.call(history, ScriptedModel())
    assert out.level == "L2"
    cuts = [r.getMessage() for r in caplog.records if "cut to fit" in r.getMessage()]
    assert len(cuts) == 1
    (limit,) = re.findall(r"more than the (\d+) allowed", cuts[0])
    marker = re.findall(r"this summary was cut to (\d+) tokens", out.view[0].text)
    assert marker == [limit]
