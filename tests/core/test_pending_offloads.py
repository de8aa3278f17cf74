"""An offloaded tool result's view form (header with its count, fitted preview) is made
when first read (R12, R23), with the exact o200k estimator and the approximate one.

In an L2 round most offloaded results are summarized at once: their forms are
never read, and are not made. The oracles: the same round with every form made at
once (the view sent, the summarizer's input, the files' bytes, the events and the
state update are equal), the forms of the summarized results left pending, and a
pending form, once read, equal in every way to the form made at once. The head
count that spares counting a result is checked against the encoder itself: the
head's tokens are the text's first tokens.
"""

from __future__ import annotations

import copy
import gc
import pickle
import random
import weakref
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ars_core import Compressor, FsspecBackend, Message, message_to_dict
from ars_core import l1 as l1_module
from ars_core._tiktoken_offline import load_encoding
from ars_core.bounds import piece_head
from ars_core.estimate import ApproxEstimator, CachingEstimator, TiktokenEstimator
from ars_core.l1 import plan_l1
from ars_core.memo import TOKENS, Memo, active
from ars_core.pending_form import is_pending
from ars_core.retention import error_lines, newest_error_lines
from ars_core.stream import CompressionEvent
from ars_core.summarize import SummaryResult
from tests.core.helpers import CountingBytes, assistant, call, small_config, tool, user

ENCODING = load_encoding("o200k_base")


def _log(i: int, lines: int = 120) -> str:
    """A build log of many lines (indented, punctuated, an error now and then)."""
    rng = random.Random(i)
    out = []
    for n in range(lines):
        kind = rng.randrange(5)
        if kind == 0:
            out.append(f"    at module_{i}.func_{n} (src/m{n}.py:{rng.randrange(900)})")
        elif kind == 1:
            out.append(f"ERROR: step {i}.{n} failed: expected {rng.random():.5f}")
        elif kind == 2:
            out.append(f"\t- compiled unit {n} of run {i} in {rng.randrange(99)} ms")
        elif kind == 3:
            out.append(f"/usr/lib/run-{i}/{n}.so: ok")
        else:
            out.append(f"test_case_{n}_{i} PASSED [{n}%]")
    return "\n".join(out) + "\n"


def _history(results: int = 30) -> list[Message]:
    messages: list[Message] = [user("build the project and fix every failing test")]
    for i in range(results):
        c = call("bash", command=f"make step{i}")
        messages += [assistant("", c), tool(c, _log(i)), assistant(f"step {i} checked")]
    messages.append(user("now run the whole suite"))
    return messages


class _Recording:
    def __init__(self) -> None:
        self.inputs: list[list[Message]] = []

    def summarize(self, messages: list[Message], prompt: str) -> SummaryResult:
        self.inputs.append(list(messages))
        return SummaryResult(text=f"summary of {len(messages)} messages")


#: the estimators whose offloads are made pending
ESTIMATORS = pytest.mark.parametrize("estimator", ["o200k", "approx"])


def _estimator(name: str) -> CachingEstimator:
    return TiktokenEstimator() if name == "o200k" else ApproxEstimator()


def _round(
    root: Path, messages: list[Message], asynchronous: bool = False, estimator: str = "o200k"
) -> dict[str, Any]:
    summarizer = _Recording()
    events: list[CompressionEvent] = []
    sent: list[list[Message]] = []
    engine = Compressor(
        small_config(summary_threshold=2, summary_keep_messages=4),
        backend=FsspecBackend(root.as_uri()),
        summarizer=summarizer,
        estimator=_estimator(estimator),
    )

    def model(view: list[Message]) -> Message:
        sent.append(list(view))
        return Message(role="assistant", content="ok")

    if asynchronous:

        async def amodel(view: list[Message]) -> Message:
            return model(view)

        async def go() -> Any:
            return await engine.acall(messages, amodel, emitter=events.append, thread="t")

        outcome = anyio.run(go)
    else:
        outcome = engine.call(messages, model, emitter=events.append, thread="t")
    assert outcome.update is not None
    return {
        "level": outcome.level,
        "sent": sent,
        "summarizer": summarizer.inputs,
        "files": {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        },
        "events": [attrs.evolve(e, round_id="", timestamp="") for e in events],
        "event": attrs.evolve(outcome.update.event, created_at=""),
        "view": outcome.view,
    }


def _dicts(messages: list[Message]) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in messages]


@pytest.mark.spec("R12", "R23")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@ESTIMATORS
def test_a_round_with_pending_forms_sends_writes_and_summarizes_what_it_did_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asynchronous: bool, estimator: str
) -> None:
    messages = _history()
    forms: list[Message] = []
    plan_one = l1_module._pending_offload

    def recording(*args: Any) -> Any:
        found = plan_one(*args)
        if found is not None:
            forms.append(found[0])
        return found

    with monkeypatch.context() as patch:
        patch.setattr(l1_module, "_pending_offload", recording)
        lazy = _round(tmp_path / "lazy", messages, asynchronous, estimator)
    # the summarized results' forms were never read: still pending
    assert lazy["level"] == "L2" and sum(map(is_pending, forms)) >= 15
    # what left the engine holds only made messages
    for view in [*lazy["sent"], *lazy["summarizer"], lazy["view"]]:
        assert all(type(m) is Message for m in view)

    with monkeypatch.context() as patch:  # every form made at once, as before
        patch.setattr(l1_module, "_pending_offload", lambda *args: None)
        fresh = [attrs.evolve(m) for m in messages]  # equal, nothing kept on them
        eager = _round(tmp_path / "eager", fresh, asynchronous, estimator)
    assert [_dicts(v) for v in lazy["sent"]] == [_dicts(v) for v in eager["sent"]]
    assert [_dicts(v) for v in lazy["summarizer"]] == [_dicts(v) for v in eager["summarizer"]]
    assert {k.replace("lazy", ""): v for k, v in lazy["files"].items()} == {
        k.replace("eager", ""): v for k, v in eager["files"].items()
    }
    offloads = [k for k in lazy["files"] if "large_tool_results/" in k]
    assert len(offloads) == 30  # the summarized results' files are written all the same
    assert lazy["events"] == eager["events"]
    assert lazy["event"] == eager["event"]


@pytest.mark.spec("R12", "R13")
@ESTIMATORS
def test_a_pending_form_once_read_is_the_form_made_at_once(
    monkeypatch: pytest.MonkeyPatch, estimator: str
) -> None:
    c = call("bash", command="make")
    est = _estimator(estimator)
    result = tool(c, _log(7))
    plan = plan_l1([result], estimator=est, tool_token_limit=120)
    form = plan.view[0]
    assert is_pending(form)
    # o200k: found above the limit by a head alone (not counted); approx: counted
    assert (TOKENS.get(result, est.cache_key) is None) is (estimator == "o200k")
    with monkeypatch.context() as patch:
        patch.setattr(l1_module, "_pending_offload", lambda *args: None)
        again = attrs.evolve(result)  # equal, with nothing kept on it
        made = plan_l1([again], estimator=est, tool_token_limit=120).view[0]
    assert not is_pending(made)
    # role, ids and metadata are read without making it
    assert form.role == "tool" and form.tool_call_id == c.id and form.metadata == made.metadata
    assert is_pending(form)
    assert form == made and repr(form) == repr(made)
    assert type(form) is Message and not is_pending(form)
    assert form.text == made.text and est.count_message(form) == est.count_message(made)
    assert TOKENS.get(form, est.cache_key) == TOKENS.get(made, est.cache_key)
    assert plan.writes[0].text == result.text


@pytest.mark.spec("R12")
@pytest.mark.parametrize("how", ["pickle", "copy", "deepcopy", "evolve", "dict"])
def test_a_pending_form_copied_or_serialized_is_made_first(how: str) -> None:
    c = call("bash")
    est = TiktokenEstimator()
    form = plan_l1([tool(c, _log(3))], estimator=est, tool_token_limit=120).view[0]
    assert is_pending(form)
    if how == "pickle":
        other = pickle.loads(pickle.dumps(form))
    elif how == "copy":
        other = copy.copy(form)
    elif how == "deepcopy":
        other = copy.deepcopy(form)
    elif how == "evolve":
        other = attrs.evolve(form, id="other")
        assert other.id == "other"
        other = attrs.evolve(other, id=form.id)
    else:
        other = Message(**{f.name: getattr(form, f.name) for f in attrs.fields(Message) if f.init})
    assert type(other) is Message and type(form) is Message
    assert other == form and other.text.startswith("[ARS: tool result offloaded: ")


_PIECES = st.sampled_from(
    ["\n", "\n\n", " ", "  ", "\t", "/", "./", "a", "Word", "x1", "42", "1234", "é", "中文",
     "(", ")", ".", "--", "\x1b[0m", "\r\n", "'s", " foo", "\u00a0", "\u2028", "_", "<a>"]
)  # fmt: skip


@pytest.mark.spec("R12")
@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=80), st.integers(1, 60))
def test_a_head_is_encoded_as_the_texts_first_tokens(pieces: list[str], start: int) -> None:
    text = "".join(pieces)
    end = piece_head(text, start)
    if end:
        head = ENCODING.encode_ordinary(text[:end])
        assert ENCODING.encode_ordinary(text)[: len(head)] == head
        assert text[end - 1] == "\n" and start <= end


@pytest.mark.spec("R23")
def test_the_newest_error_lines_are_those_of_the_whole_history() -> None:
    messages = _history(20)
    for k in (1, 3, 10, 500):
        assert newest_error_lines(messages, k) == error_lines(messages, last=k)


@pytest.mark.spec("R12", "R14")
@ESTIMATORS
def test_an_l1_view_sent_holds_every_form_made_as_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, estimator: str
) -> None:
    """A round that ends at L1 sends every form: all made, equal to the eager ones."""
    messages = _history(8)

    def l1_round(root: Path, history: list[Message]) -> tuple[Any, list[Message]]:
        sent: list[list[Message]] = []
        engine = Compressor(
            small_config(summary_threshold=2, summary_l2_trigger_ratio=1.0),
            backend=FsspecBackend(root.as_uri()),
            estimator=_estimator(estimator),
        )
        outcome = engine.call(
            history, lambda view: sent.append(view) or Message(role="assistant", content="ok")
        )
        return outcome, sent[-1]

    made: list[Message] = []
    real = l1_module.pending_form
    with monkeypatch.context() as patch:  # the forms are made pending, then sent made
        patch.setattr(l1_module, "pending_form", lambda *a: made.append(real(*a)) or made[-1])
        lazy, lazy_sent = l1_round(tmp_path / "lazy", messages)
    assert len(made) == 8 and all(m in lazy_sent for m in made)
    with monkeypatch.context() as patch:
        patch.setattr(l1_module, "_pending_offload", lambda *args: None)
        eager, eager_sent = l1_round(tmp_path / "eager", [attrs.evolve(m) for m in messages])
    assert lazy.level == eager.level == "L1"
    assert all(type(m) is Message for m in lazy_sent)
    assert _dicts(lazy_sent) == _dicts(eager_sent)
    assert sum(m.metadata.get("ars_offloaded") is not None for m in lazy_sent) == 8


def _plan_counting_texts(
    monkeypatch: pytest.MonkeyPatch, est: TiktokenEstimator, message: Message, limit: int
) -> tuple[Any, list[str]]:
    counted: list[str] = []
    count_text = est.count_text

    def recording(text: str) -> int:
        counted.append(text)
        return count_text(text)

    with monkeypatch.context() as patch:
        patch.setattr(est, "count_text", recording)
        plan = plan_l1([message], estimator=est, tool_token_limit=limit)
    return plan, counted


@pytest.mark.spec("R12", "R23")
def test_a_pending_offload_whose_header_bytes_fit_counts_neither_header_nor_shell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = call("bash", command="make")
    result = tool(c, _log(11))
    est = TiktokenEstimator()
    plan, counted = _plan_counting_texts(monkeypatch, est, result, 400)
    form = plan.view[0]
    assert is_pending(form)
    header = l1_module.offload_body(
        plan.writes[0].path, result.text, "", len(result.text.encode("utf-8"))
    )
    assert header not in counted and c.id not in counted  # the bounds decided it
    with monkeypatch.context() as patch:
        patch.setattr(l1_module, "_pending_offload", lambda *args: None)
        made = plan_l1([attrs.evolve(result)], estimator=est, tool_token_limit=400).view[0]
    assert form == made


@pytest.mark.spec("R12", "R23")
@pytest.mark.parametrize("limit", [60, 120, 130, 150, 300, 400])
def test_a_pending_offload_is_decided_as_by_exact_counts(
    monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    # a long call id and tool name: the bytes of shell and header (391) are above limits
    # the exact counts are not (130..300: counted, then offloaded pending), and at 400 not
    c = call("bash_" + "x" * 40, command="make")
    result = attrs.evolve(tool(c, _log(12)), tool_call_id="id-" + "7" * 90)
    est = TiktokenEstimator()

    def exact(e: TiktokenEstimator, m: Message, header: str, lim: int) -> bool:
        shell = est.count_message(m.with_content(""))
        return shell + est.count_text(header) > lim

    lazy = plan_l1([result], estimator=est, tool_token_limit=limit)
    with monkeypatch.context() as patch:
        patch.setattr(l1_module, "_shell_and_header_above", exact)
        reference = plan_l1([attrs.evolve(result)], estimator=est, tool_token_limit=limit)
    assert is_pending(lazy.view[0]) == is_pending(reference.view[0])
    assert _dicts(lazy.view) == _dicts(reference.view)
    assert [w.path for w in lazy.writes] == [w.path for w in reference.writes]


@pytest.mark.spec("R12")
def test_a_result_within_the_limit_by_its_bytes_is_measured_once_and_never_encoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """L1 over small tool results (each within the limit by its UTF-8 bytes) with the
    exact o200k estimator: each is measured once, nothing is encoded, and the view is
    the history. A result above the limit in bytes but not in tokens is counted and
    left as it is."""
    from ars_core.memo import Memo, active

    calls = [call("bash", command=f"ls {i}") for i in range(6)]
    small = [tool(c, f"file_{i}.py\nREADME.md") for i, c in enumerate(calls)]
    est = TiktokenEstimator()
    est.utf8_bytes = counting = CountingBytes()
    counted: list[str] = []
    count_text = est.count_text
    monkeypatch.setattr(est, "count_text", lambda text: counted.append(text) or count_text(text))
    with active(Memo()):
        plan = plan_l1(small, estimator=est, tool_token_limit=80)
    assert plan.view == tuple(small) and not plan.writes
    assert [id(m) for m in counting.measured] == [id(m) for m in small]
    assert counted == []
    prose = tool(calls[0], "word " * 60)  # 300 bytes, 60 tokens
    with active(Memo()):
        plan = plan_l1([prose], estimator=est, tool_token_limit=100)
    assert plan.view == (prose,) and prose.text in counted


def _quiet_log(i: int, lines: int = 120) -> str:
    """A log of many lines holding no error word."""
    return "".join(f"test_case_{n}_{i} PASSED [{n}%]\n" for n in range(lines))


@pytest.mark.spec("R23", "R58")
def test_a_pending_form_that_cannot_hold_an_error_word_is_not_made_for_its_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Error lines read over an L1 view of pending forms: the same lines as over the
    forms made at once; a form whose result and header hold no error word stays pending,
    one whose result holds one is made, and so is one whose header does (a tool named
    with an error word: its path is in the header line)."""
    quiet, noisy, named = call("bash", command="ls"), call("bash", command="make"), call("FAILED")
    history = [
        user("build it"),
        assistant("", quiet, noisy, named),
        tool(quiet, _quiet_log(1)),
        tool(noisy, _log(2)),
        tool(named, _quiet_log(3)),
    ]
    est = TiktokenEstimator()
    view = list(plan_l1(history, estimator=est, tool_token_limit=100).view)
    assert all(is_pending(m) for m in view[2:])
    with monkeypatch.context() as patch:
        patch.setattr(l1_module, "_pending_offload", lambda *args: None)
        eager = list(
            plan_l1([attrs.evolve(m) for m in history], estimator=est, tool_token_limit=100).view
        )
    for k in (1, 3, 500):
        assert newest_error_lines(view, k) == newest_error_lines(eager, k)
    assert error_lines(view) == error_lines(eager)
    assert [is_pending(m) for m in view[2:]] == [True, False, False]
    assert any("FAILED" in line for line in error_lines(eager))  # the header's path
    assert view == eager


@pytest.mark.spec("R23", "R58")
def test_a_pending_forms_error_lines_are_worked_out_once() -> None:
    """The answer that a form cannot hold an error word is kept on it as its error
    lines: reading them again asks the form nothing (a large result is not searched
    for every word at every read)."""
    from ars_core.pending_form import pending_form

    asked: list[str] = []

    def may_hold(word: str) -> bool:
        asked.append(word)
        return False

    c = call("bash", command="ls")
    form = pending_form(tool(c, "").with_content(""), lambda f: "never made", may_hold)
    assert error_lines([form]) == [] and newest_error_lines([form], 3) == []
    first = list(asked)
    assert first and error_lines([form]) == [] and asked == first
    assert is_pending(form)


@pytest.mark.spec("R12")
def test_what_l1_keeps_on_a_message_it_leaves_as_it_is_does_not_hold_it() -> None:
    """The plan L1 keeps on each message it leaves as it is (a request, a call, a
    result within the limit) holds no reference back to that message: with the garbage
    collector off, a history planned and then dropped frees them by reference counting
    alone (a plan holding its own message made a cycle of nearly every message of a
    history, for the collector to find). An offloaded result's form makes its text
    from the result when first read: that one is left to the collector."""
    c, d = call("bash", cmd="make"), call("read_file", path="a.py")
    history = [user("build"), assistant("", c, d), tool(c, "ok"), tool(d, _log(3))]
    alive = [weakref.ref(m) for m in history]
    gc.disable()
    try:
        with active(Memo()):  # an engine's memo, dropped with it (not the process's)
            plan = plan_l1(history, estimator=TiktokenEstimator(), tool_token_limit=300)
        assert len(plan.writes) == 1 and is_pending(plan.view[3])  # the log offloaded
        assert all(m is v for m, v in zip(history[:3], plan.view, strict=False))
        del plan, history, c, d
        freed = [ref() is None for ref in alive]
        assert freed == [True, True, True, False]
    finally:
        gc.enable()


_TEXT = st.text(
    st.sampled_from([*"ab AZ09,.;=-\n\t/_()[]{}'\"", "é", "中", "🙂", "ü", "Ω"]),
    min_size=0,
    max_size=1_500,
)


@pytest.mark.spec("R12", "R13")
@settings(max_examples=150, deadline=None)
@given(
    text=_TEXT,
    limit=st.integers(min_value=20, max_value=400),
    name=st.sampled_from(["bash", "read_file", "x" * 60]),
    call_id=st.sampled_from(["c1", "call_" + "9" * 80, "id-" + "ab" * 40]),
)
def test_an_approximate_pending_offload_is_the_offload_made_at_once(
    text: str, limit: int, name: str, call_id: str
) -> None:
    """With the approximate estimator, a tool result is offloaded pending exactly when
    the offload made at once happens (and is smaller than the result), to the same
    file; once read, the pending form is that form, and it counts as that form does."""
    result = Message(role="tool", content=text, name=name, tool_call_id=call_id)
    est = ApproxEstimator()
    lazy = plan_l1([result], estimator=est, tool_token_limit=limit)
    real = l1_module._pending_offload
    try:
        l1_module._pending_offload = lambda *args: None  # type: ignore[assignment]
        eager = plan_l1([attrs.evolve(result)], estimator=ApproxEstimator(), tool_token_limit=limit)
    finally:
        l1_module._pending_offload = real  # type: ignore[assignment]
    if is_pending(lazy.view[0]):  # pending only where the form made at once is an offload
        assert eager.view[0] is not result and eager.view[0].metadata
    assert [w.path for w in lazy.writes] == [w.path for w in eager.writes]
    assert _dicts(list(lazy.view)) == _dicts(list(eager.view))
    assert est.count_message(lazy.view[0]) == est.count_message(eager.view[0])
