"""What an L2 round reads of the history tracks what changed: the cut's forbidden
positions, the conversation's turns and its total, the archive's lines and the
kept tail's sizes are kept by the engine's memo as a history grows (only the
appended messages are read). Each test compares what an engine memo that saw the
earlier histories gives with what a fresh memo given only the current history
gives: a growing history, a shorter one, one edited in the middle, one whose
open tool call is answered later."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import pytest

from ars_core import ApproxEstimator, Compressor, Message, message_to_dict
from ars_core.archive import HistoryArchive, read_archive
from ars_core.cutoff import conversation_tokens, kept_cut
from ars_core.estimate import message_sizes
from ars_core.l1 import plan_l1
from ars_core.l1_media import offload_inline_media
from ars_core.l1_user import offload_oversized_user_messages
from ars_core.l2 import forbidden_cuts, select_cutoff
from ars_core.memo import Memo, active
from ars_core.summarize import MessageSizes, condense_history, history_total, turn_tokens
from ars_core.testing import FakeSummarizer

from .helpers import assistant, call, memory_backend, small_config, tool, user, words

pytestmark = pytest.mark.spec("R51", "R21", "R23")

EST = ApproxEstimator()


def agent_run(n: int) -> list[Message]:
    """``n`` messages of an agent run: requests, tool calls (some answered only a few
    messages later, some with two results, some writing files), results (some
    large), plain answers."""
    out: list[Message] = []
    open_calls: list[Any] = []
    i = 0
    while len(out) < n:
        kind = i % 7
        if kind == 0:
            out.append(user(words(5 + i % 11 + (i % 2) * 100, f"q{i}")))
        elif kind in (1, 4):
            calls = [call("bash", f"c{i}a", command=f"ls {i}")]
            if kind == 4:
                calls.append(call("write_file", f"c{i}b", path=f"/f{i}.py", content=f"x = {i}"))
            out.append(assistant(words(i % 3, f"t{i}"), *calls))
            open_calls += calls
        elif kind in (2, 5) and open_calls:
            out.append(tool(open_calls.pop(0), words(20 + i % 40 + (i % 3) * 150, f"r{i}")))
        else:
            out.append(assistant(words(8 + i % 5, f"a{i}")))
        i += 1
    return out


def histories() -> Iterator[list[Message]]:
    """A history growing one message at a time, then shorter, then edited in the
    middle (a message replaced by an equal-looking new one, then by another text),
    then growing again."""
    base = agent_run(60)
    for n in range(1, len(base) + 1):
        yield base[:n]
    yield base[:30]
    yield base[:45]
    edited = list(base)
    edited[20] = user(words(12, "edited"))
    yield edited
    yield [*edited, assistant("later")]
    yield base[5:]  # another first message
    yield base


def passes(history: Sequence[Message]) -> dict[str, Any]:
    archive = HistoryArchive.of(history, start=0, thread="t")
    sizes = MessageSizes(EST, history, 1)
    plan = plan_l1(history, estimator=EST, tool_token_limit=40, arg_char_limit=6)
    users = offload_oversized_user_messages(plan, estimator=EST, threshold=12, preview_tokens=8)
    return {
        "plan": plan,
        "users": users,
        "media": offload_inline_media(users, tool_token_limit=1),
        "forbidden": forbidden_cuts(history),
        "turns": turn_tokens(history, EST),
        "condensed": condense_history(history, 400, EST, task_tokens=60),
        "conversation": conversation_tokens(history, EST),
        "total": history_total(history, EST),
        "lines": archive.lines,
        "digests": archive.digests,
        "sizes": list(sizes),
        "tail": sizes[-3:],
    }


def fresh(compute: Callable[[Sequence[Message]], Any], history: Sequence[Message]) -> Any:
    with active(Memo()):
        return compute(list(history))


def test_every_pass_of_a_growing_or_edited_history_matches_a_fresh_memo() -> None:
    """The engine memo's answers equal a fresh memo's at every step, and are what the
    history holds: the archive's lines are the messages as JSON, the sizes each
    message's count."""
    engine = Memo()
    for history in histories():
        with active(engine):
            seen = passes(history)
        assert seen == fresh(passes, history), len(history)
        assert [line.decode() for line in seen["lines"]] == [
            HistoryArchive.of([m], start=0).lines[0].decode() for m in history
        ]
        assert seen["sizes"] == message_sizes(EST, history[1:])
        assert len(seen["forbidden"]) == len(history) + 1
    assert len(seen["condensed"]) < len(history)  # condensed: some omitted or shortened
    # every kind of change was met: results offloaded, arguments cut, requests offloaded
    assert seen["plan"].writes and seen["plan"].truncated_args and seen["users"] != seen["plan"]


def test_forbidden_cuts_follow_results_that_arrive_later() -> None:
    """A call answered two messages later makes the cuts between them invalid once
    the result arrives, in the memo that saw the call open, as in a fresh one."""
    c = call("bash", "late", command="make")
    history = [user("build it"), assistant("", c), assistant("still running")]
    engine = Memo()
    with active(engine):
        assert forbidden_cuts(history) == [False, False, False, False]
        history = [*history, tool(c, "done")]
        assert forbidden_cuts(history) == [False, False, True, True, False]
        assert forbidden_cuts(history[:3]) == [False, False, False, False]
    assert fresh(forbidden_cuts, history) == [False, False, True, True, False]


def test_lazy_sizes_give_the_cut_a_list_gives() -> None:
    """``kept_cut`` over the lazily counted sizes is the cut over the whole list."""
    history = agent_run(80)
    forbidden = forbidden_cuts(history)
    for start in (0, 1):
        for tail_room in (0, 50, 200, 10_000):
            lazy = MessageSizes(EST, history, start)
            whole = message_sizes(EST, history[start:])
            args = dict(start=start, tail_room=tail_room, room=tail_room + 300)
            assert kept_cut(history, 10, sizes=lazy, forbidden=forbidden, **args) == kept_cut(
                history, 10, sizes=whole, forbidden=forbidden, **args
            )
            assert lazy[2:5] == whole[2:5] and lazy[-1] == whole[-1]
    with pytest.raises(IndexError):
        MessageSizes(EST, history, 0)[len(history)]


def test_rounds_over_a_growing_agent_run_match_a_fresh_engine() -> None:
    """An L2 round on every call of a growing agent run (no summary kept, so each
    round archives the same first messages again, in a continuation of its last
    archive): the engine that saw every earlier history cuts and sends exactly what
    an engine given only this one does, and its archive chain holds the summarized
    messages."""
    history = agent_run(40)
    backend = memory_backend()
    engine = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
    rounds = 0
    for step in range(40, 70):
        history = history + agent_run(step + 1)[step:]  # one more message, new objects
        if select_cutoff(history, 4) is None:
            continue
        outcome = engine.compact(history)
        other = Compressor(
            small_config(), backend=memory_backend(), summarizer=FakeSummarizer("S")
        ).compact(list(history))
        assert outcome.update is not None and other.update is not None
        mine, theirs = outcome.update.event, other.update.event
        assert mine is not None and theirs is not None
        assert mine.cutoff == theirs.cutoff
        # the summary names this engine's archive (a continuation of its last one)
        assert [message_to_dict(m) for m in outcome.view[1:]] == [
            message_to_dict(m) for m in other.view[1:]
        ]
        assert mine.file_path is not None and theirs.file_path is not None
        assert [message_to_dict(m) for m in read_archive(backend, mine.file_path)] == [
            message_to_dict(m) for m in history[: mine.cutoff]
        ]
        rounds += 1
    assert rounds > 20


def test_an_equal_copy_of_a_history_is_planned_with_its_own_messages() -> None:
    """A history of equal messages that are other objects (an adapter's new
    conversion of the same history) extends the remembered one, and its L1 view
    holds its own messages, not the remembered ones, as a fresh memo's does."""

    def plan(history: Sequence[Message]) -> Any:
        return plan_l1(history, estimator=EST, tool_token_limit=40, arg_char_limit=6)

    history = agent_run(40)
    copies = [history[0], *(attrs.evolve(m) for m in history[1:])]  # the same first one
    with active(Memo()):
        plan(history)
        planned = plan(copies)
    assert planned == fresh(plan, copies) and planned.replaced
    for i, (sent, mine) in enumerate(zip(planned.view, copies, strict=True)):
        assert (sent is mine) is (i not in planned.replaced)
    assert all(planned.replaced[i] is copies[i] for i in planned.replaced)
