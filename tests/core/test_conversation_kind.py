"""A chat or an agent run: what sizes a lean round's summary and its input.

``conversation_tokens`` answers the tokens of what the people said (the turns)
when they are most of the history (a chat), else 0 (an agent run). For an
estimator bounded by UTF-8 bytes, a history of more than ``AGENT_RUN_BYTES``
times its turns' bytes is an agent run without encoding anything; below that
the counts decide, as they always do for other estimators.
"""

from __future__ import annotations

import attrs
import pytest

from ars_core import ApproxEstimator, Message
from ars_core.bounds import Utf8Bytes
from ars_core.cutoff import AGENT_RUN_BYTES, conversation_tokens
from ars_core.estimate import Estimator, TiktokenEstimator, message_tokens
from ars_core.memo import Memo, active
from ars_core.messages import ContentPart
from ars_core.pending_form import is_pending, pending_form
from ars_core.summarize import turn_messages, turn_tokens
from ars_core.testing import RecordingTiktoken

from .helpers import CountingBytes, assistant, call, tool, user, words

pytestmark = pytest.mark.spec("R23", "R59")

BYTES = Utf8Bytes()


def run(result_words: int, results: int = 4, note: str = "") -> list[Message]:
    """A task, tool calls with results of ``result_words`` words each, an assistant note
    and a follow-up request between them (the turns), the newest request and its answer."""
    history = [user("Fix the failing test in the parser module. " + words(20, "task"))]
    for i in range(results):
        c = call("bash", command=f"pytest -k case{i}")
        history += [assistant("", c), tool(c, words(result_words, f"out{i}"))]
        if i == 1:
            history += [assistant(note or words(200, "note")), user(words(150, "followup"))]
    return [*history, user("Run the whole suite now."), assistant("done")]


def exact(history: list[Message], estimator: Estimator) -> int:
    """The counts' answer: the turns' tokens, or 0 when the history is above twice them."""
    turns = turn_tokens(history, estimator)
    return 0 if sum(message_tokens(estimator, m) for m in history) > 2 * turns else turns


def byte_ratio(history: list[Message]) -> float:
    return sum(map(BYTES.measure, history)) / sum(map(BYTES.measure, turn_messages(history)))


def test_an_agent_run_far_above_its_turns_in_bytes_is_told_without_encoding() -> None:
    """Tool results many times the turns' bytes: an agent run, and nothing is encoded
    (the counts agree)."""
    history = run(result_words=2_000)
    assert byte_ratio(history) > AGENT_RUN_BYTES
    est = RecordingTiktoken()
    assert conversation_tokens(history, est) == 0
    assert est.texts == []
    assert exact(history, TiktokenEstimator()) == 0


@pytest.mark.parametrize("result_words", [0, 90, 200])
def test_between_the_bands_the_counts_decide(result_words: int) -> None:
    """Histories of at most ``AGENT_RUN_BYTES`` times their turns' bytes, on both sides
    of twice their tokens: the answer is the counts' and the turns were encoded."""
    history = run(result_words)
    assert byte_ratio(history) <= AGENT_RUN_BYTES
    est = RecordingTiktoken()
    assert conversation_tokens(history, est) == exact(history, TiktokenEstimator())
    turns = [m.text for m in history[5:7]]  # the note and the follow-up request
    assert all(text in est.texts for text in turns)


def test_the_bands_give_both_answers() -> None:
    """The histories above: a chat (the turns' tokens) at the small results, an agent
    run (0) at the large ones (so both answers are reachable by counting)."""
    est = TiktokenEstimator()
    assert conversation_tokens(run(0), est) == turn_tokens(run(0), est) > 0
    assert conversation_tokens(run(200), est) == 0


def test_the_byte_rule_holds_where_the_counts_would_not() -> None:
    """Turns of one token a byte and results of runs of dashes (a token per ~64 bytes):
    the bytes say agent run and so does the answer, although the counts say chat (the
    rule is by bytes past its margin, by name)."""
    history = run(result_words=0, note=" ".join(str(i % 10) for i in range(600)))
    history = [
        m if m.role != "tool" else m.with_content("-" * 3_000) for m in history
    ]  # fmt: skip
    assert byte_ratio(history) > AGENT_RUN_BYTES
    assert exact(history, TiktokenEstimator()) > 0  # the counts: a chat
    assert conversation_tokens(history, RecordingTiktoken()) == 0


def test_an_estimator_not_bounded_by_bytes_counts() -> None:
    """The approximate estimator: the counts decide, whatever the bytes say."""
    history = run(result_words=0, note=" ".join(str(i % 10) for i in range(600)))
    history = [m if m.role != "tool" else m.with_content("-" * 3_000) for m in history]
    est = ApproxEstimator()
    assert conversation_tokens(history, est) == exact(history, est)
    assert conversation_tokens(run(2_000), est) == exact(run(2_000), est) == 0


def test_offloads_not_yet_made_are_left_unmade() -> None:
    """Pending offload forms are left out of the byte sum, not made to be measured:
    enough bytes besides them settle it; too few leave it to the counts."""
    made: list[str] = []

    def fill(form: Message) -> str:
        made.append(form.tool_call_id or "")
        return "offloaded: " + words(50, "preview")

    def with_forms(history: list[Message]) -> list[Message]:
        return [
            pending_form(m.with_content(""), fill) if m.role == "tool" and i < 3 else m
            for i, m in enumerate(history)
        ]

    settled = with_forms(run(result_words=2_000))
    est = RecordingTiktoken()
    assert conversation_tokens(settled, est) == 0
    assert made == [] and est.texts == []
    assert sum(map(is_pending, settled)) == 1
    counted = with_forms(run(result_words=90))
    assert conversation_tokens(counted, RecordingTiktoken()) == exact(counted, TiktokenEstimator())


def test_offloads_not_yet_made_are_counted_last() -> None:
    """Between the bands the counts decide, newest first, but an offload whose form is
    not made yet is counted after every other message: here the others settle it (an
    agent run), so the newest result's form is not made to be counted; the answer is
    the counts' with that form made."""
    made: list[str] = []

    def fill(form: Message) -> str:
        made.append(form.tool_call_id or "")
        return "offloaded: " + words(50, "preview")

    history = run(result_words=200)
    assert byte_ratio(history) <= AGENT_RUN_BYTES
    c = call("bash", command="cat build.log")
    form = pending_form(tool(c, ""), fill)
    history += [assistant("", c), form]  # the newest message: read first
    assert conversation_tokens(history, RecordingTiktoken()) == 0
    assert made == [] and is_pending(form)
    assert exact(history, TiktokenEstimator()) == 0
    assert made == [c.id]


def test_turns_holding_images_are_decided_by_the_counts_cold_as_warm() -> None:
    """A user turn with three images by URL: an image's bound is its count (about a
    token a byte), so the turns' bytes stand for far fewer tokens than text's would and
    the bytes say agent run where the counts say chat. The counts decide, on a history
    nothing has counted as on one whose turns' counts are held: one answer either way."""
    screens = Message(
        role="user",
        content=(
            ContentPart("text", "these are the screens"),
            *(
                ContentPart("image", data={"url": f"https://example.com/s{i}.png"})
                for i in range(3)
            ),
        ),
    )
    history = run(result_words=1_000)
    history = [*history[:5], screens, *history[5:]]
    assert byte_ratio(history) > AGENT_RUN_BYTES  # the bytes alone would say agent run
    answer = exact(history, TiktokenEstimator())
    assert answer > 0  # the counts: a chat
    assert conversation_tokens(history, RecordingTiktoken()) == answer
    est = RecordingTiktoken()
    with active(Memo()):
        for m in history:
            message_tokens(est, m)  # an earlier call counted the history
        assert conversation_tokens([*history], est) == answer


def test_the_same_messages_read_again_are_not_measured_again() -> None:
    """A round reads its summarized part twice (to cut, to summarize): the second read
    of the very same messages takes the engine's answer; equal but other objects, or
    one message more, are measured again."""
    history = run(result_words=2_000)
    est = RecordingTiktoken()
    est.utf8_bytes = counting = CountingBytes()
    with active(Memo()):
        assert conversation_tokens(history, est) == 0
        first = len(counting.measured)
        assert first > 0
        assert conversation_tokens(list(history), est) == 0
        assert len(counting.measured) == first
        copies = [attrs.evolve(m) for m in history]
        assert conversation_tokens(copies, est) == 0
        assert len(counting.measured) > first
        again = len(counting.measured)
        assert conversation_tokens([*copies, user("and then?")], est) == 0
        assert len(counting.measured) > again
    assert est.texts == []


@pytest.mark.parametrize("result_words", [0, 2_000])
def test_turns_whose_counts_are_held_are_decided_by_their_counts(result_words: int) -> None:
    """A warm round: the engine holds every turn's count (the history was counted on
    an earlier call), so their sum decides and no byte is measured, a chat or an agent
    run alike; the answer is the counts'."""
    history = run(result_words)
    est = RecordingTiktoken()
    est.utf8_bytes = counting = CountingBytes()
    with active(Memo()):
        for m in history:
            message_tokens(est, m)  # an earlier call counted the history
        assert conversation_tokens([*history], est) == exact(history, TiktokenEstimator())
    assert counting.measured == []
