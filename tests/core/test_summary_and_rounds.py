"""Summaries are checked before they enter state (R54, R41); every started
round ends with ``completed`` or ``failed``, cancellation included (R55,
R30-R32); the seed's exact rules for tail trims, L1 replacements, offload
markers and configuration (R43, R12, R13, R35). Through :class:`Compressor`,
sync and async."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from typing import Any

import anyio
import pytest

from ars_core import (
    MARK_OFFLOADED,
    MARK_TRIMMED,
    ApproxEstimator,
    CallOutcome,
    Compressor,
    ConfigError,
    Message,
    SummaryConfig,
    task_statement,
)
from ars_core.l1 import offload_body
from ars_core.testing import FakeSummarizer, RecordingEmitter, ScriptedModel

from .helpers import assistant, call, files_in, memory_backend, small_config, tool, user, words

EST = ApproxEstimator()


def history(pairs: int, size: int = 60) -> list[Message]:
    out: list[Message] = []
    for i in range(pairs):
        out += [user(f"q{i} " + words(size, f"q{i}")), assistant(f"a{i} " + words(size, f"a{i}"))]
    return out


def run(
    mode: str, compressor: Compressor, state: list[Message], model: ScriptedModel, **kw: Any
) -> CallOutcome:
    if mode == "sync":
        return compressor.call(state, model, **kw)

    async def go() -> CallOutcome:
        return await compressor.acall(state, model.acall, **kw)

    return anyio.run(go)


MODES = pytest.mark.parametrize("mode", ["sync", "async"])
#: opens what the summarizer wrote after the engine's task sections
SUMMARY_MARK = "⟦ARS⟧ Summary\n"


# ------------------------------------------------------------------ summaries


@pytest.mark.spec("R54")
class TestSummaryIsChecked:
    @MODES
    def test_an_oversized_summary_is_cut_with_a_marker_and_a_warning(
        self, mode: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A 3 MB summary is cut with a marker to its bound: ``summary_max_tokens``
        less the task sections the engine wrote before it and the frame around the text
        (its header, the end mark); the next request stays small."""
        huge = "the summary goes on and on " * 110_000  # ~3 MB
        compressor = Compressor(
            small_config(summary_max_tokens=200),
            backend=memory_backend(),
            summarizer=FakeSummarizer(huge),
        )
        model = ScriptedModel(["ok"])
        with caplog.at_level(logging.WARNING, logger="ars"):
            outcome = run(mode, compressor, history(8), model)
        assert outcome.update is not None and outcome.update.event is not None
        event = outcome.update.event
        assert event.summary_error is None
        text = event.summary_message.text
        task = text[: text.index(SUMMARY_MARK)].split("\n\n", 1)[1]
        cut = re.search(r"\[ARS: this summary was cut to (\d+) tokens", text)
        assert cut is not None and task.startswith("⟦ARS⟧ Task")
        bound = int(cut.group(1))  # what the task sections left (counted part by part)
        frame = compressor.estimator.count_text(f"{SUMMARY_MARK}\n\n⟦ARS⟧ end of summary")
        assert abs(bound - (200 - compressor.estimator.count_text(task) - frame)) <= 3
        assert text.index(huge[:30]) > text.index(SUMMARY_MARK) and len(text) < 2_000
        assert f"more than the {bound} allowed; cut to fit" in caplog.text
        assert outcome.tokens_after < compressor.config.threshold_tokens

    @pytest.mark.parametrize("threshold_k", [1, 16, 100, 1000])
    def test_the_summary_bound_is_configurable_and_never_above_half_the_threshold(
        self, threshold_k: int
    ) -> None:
        default = SummaryConfig(summary_threshold=threshold_k)
        assert 0 < default.summary_token_limit <= default.threshold_tokens // 2
        explicit = SummaryConfig(summary_threshold=threshold_k, summary_max_tokens=300)
        assert explicit.summary_token_limit == 300
        with pytest.raises(ConfigError):
            SummaryConfig(summary_max_tokens=0)

    @MODES
    @pytest.mark.parametrize(
        ("bad", "error"),
        [
            (123, "SummarizerError: the summarizer returned int instead of the summary text"),
            (None, "SummarizerError: the summarizer returned NoneType instead of the summary text"),
            ("", "SummarizerError: the summarizer returned an empty summary"),
            ("  \n ", "SummarizerError: the summarizer returned an empty summary"),
        ],
    )
    def test_a_non_text_or_empty_summary_is_a_summary_failure(
        self, mode: str, bad: Any, error: str
    ) -> None:
        """Not raised, not accepted: the failure path (error text + fallback)."""
        compressor = Compressor(
            small_config(), backend=memory_backend(), summarizer=FakeSummarizer(lambda _: bad)
        )
        model = ScriptedModel(["ok"])
        outcome = run(mode, compressor, history(8), model)
        assert outcome.response == "ok"
        assert outcome.update is not None and outcome.update.event is not None
        event = outcome.update.event
        assert event.summary_error == error
        assert event.summary_usage is None
        text = event.summary_message.text
        assert f"[ARS: the summary model failed: {error}]" in text
        assert "q0 " in text  # the deterministic fallback summary keeps the task

    @MODES
    def test_model_visible_error_text_holds_no_host_path(self, mode: str) -> None:
        """The summary, the checkpointed event and the stream name the error
        type and a short message with host paths removed."""
        secret = "/home/alice/.config/llm/key.json"
        failure = PermissionError(f"[Errno 13] Permission denied: '{secret}' " + "x" * 2000)
        emitter = RecordingEmitter()
        compressor = Compressor(
            small_config(),
            backend=memory_backend(),
            summarizer=FakeSummarizer(error=failure),
            emitter=emitter,
        )
        outcome = run(mode, compressor, history(8), ScriptedModel(["ok"]))
        assert outcome.update is not None and outcome.update.event is not None
        event = outcome.update.event
        assert event.summary_error is not None
        assert event.summary_error.startswith(
            "PermissionError: [Errno 13] Permission denied: '<path>' xxx"
        )
        assert len(event.summary_error) <= len("PermissionError: ") + 300
        stored = json.dumps(event.to_dict()) + json.dumps([e.to_dict() for e in emitter.events])
        assert secret not in stored and "/home/alice" not in stored


# ------------------------------------------------------------------ rounds end


@pytest.mark.spec("R55", "R30", "R32")
class TestEveryRoundEnds:
    def test_cancelling_acall_during_archive_and_summary_reports_failed_then_resumes(
        self,
    ) -> None:
        """``acall`` is cancelled while the summary model runs: ``failed``
        follows ``started`` and the cancellation propagates; nothing was
        persisted, and the next call resumes from the same state."""
        state = history(8)
        emitter = RecordingEmitter()
        entered = anyio.Event()

        async def never() -> None:
            entered.set()
            await anyio.sleep_forever()

        backend = memory_backend()
        # FakeSummarizer's summary is tiny: a small bound leaves the kept tail its 4 messages
        compressor = Compressor(
            small_config(summary_max_tokens=64),
            backend=backend,
            summarizer=FakeSummarizer(gate=never),
            emitter=emitter,
        )
        model = ScriptedModel(["ok"])

        async def cancelled() -> None:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await compressor.acall(state, model.acall)

                tg.start_soon(call)
                await entered.wait()
                tg.cancel_scope.cancel()

        anyio.run(cancelled)
        assert emitter.phases == [("started", "L1"), ("failed", "L2")]
        failed = emitter.events[1]
        assert failed.round_id == emitter.events[0].round_id
        assert failed.error is not None and failed.error.startswith("CancelledError")
        assert model.calls == []

        # resume: the persisted state is unchanged (no event), the round runs again
        emitter.events.clear()
        compressor.summarizer = FakeSummarizer("SUMMARY")
        resumed = anyio.run(lambda: compressor.acall(state, model.acall))
        assert resumed.level == "L2" and resumed.update is not None
        assert resumed.update.event is not None
        assert model.calls[-1] == [resumed.update.event.summary_message, *state[-4:]]
        assert emitter.phases == [("started", "L1"), ("completed", "L2")]

    def test_asyncio_task_cancel_reports_failed(self) -> None:
        """Plain asyncio cancellation (``Task.cancel``) ends the round too."""
        emitter = RecordingEmitter()
        entered = asyncio.Event()

        async def never() -> None:
            entered.set()
            await asyncio.Event().wait()

        compressor = Compressor(
            small_config(),
            backend=memory_backend(),
            summarizer=FakeSummarizer(gate=never),
            emitter=emitter,
        )

        async def go() -> None:
            task = asyncio.ensure_future(compressor.acall(history(8), ScriptedModel().acall))
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(go())
        assert emitter.phases == [("started", "L1"), ("failed", "L2")]

    @MODES
    def test_an_exception_inside_l1_reports_failed(self, mode: str) -> None:
        """A failure while L1 builds its copy (here a user's estimator that
        breaks on the preview) ends the started round with ``failed``."""

        class BrokenPreviews(ApproxEstimator):
            def count_text(self, text: str) -> int:
                if text.startswith("[ARS: tool result offloaded"):
                    raise RuntimeError("estimator broke")
                return super().count_text(text)

        emitter = RecordingEmitter()
        compressor = Compressor(
            small_config(), estimator=BrokenPreviews(), backend=memory_backend(), emitter=emitter
        )
        c = call("bash")
        state = [user(words(700)), assistant("", c), tool(c, words(400))]
        with pytest.raises(RuntimeError, match="estimator broke"):
            run(mode, compressor, state, ScriptedModel())
        assert emitter.phases == [("started", "L1"), ("failed", "L1")]
        assert emitter.events[1].error == "RuntimeError: estimator broke"

    @MODES
    def test_an_interrupt_in_the_model_call_reports_failed(self, mode: str) -> None:
        """A ``BaseException`` (KeyboardInterrupt) from the main model ends the round."""
        emitter = RecordingEmitter()
        compressor = Compressor(small_config(), backend=memory_backend(), emitter=emitter)

        def interrupted(_: list[Message]) -> Any:
            raise KeyboardInterrupt

        model = ScriptedModel([interrupted])
        with pytest.raises(KeyboardInterrupt):
            run(mode, compressor, history(8), model)
        assert emitter.phases == [("started", "L1"), ("failed", "L2")]


# ------------------------------------------------------------------ the seed's rules


class TestSeedRules:
    @pytest.mark.spec("R43", "R22")
    @MODES
    def test_the_tail_trim_is_persisted_only_under_overflow(self, mode: str) -> None:
        """A long final paste is trimmed in the view sent, but without a context
        overflow the checkpoint keeps it as it is (no ``replaced``)."""
        # just below T: a user message above T would be offloaded by L1 instead
        # (the paste is the newest message, kept alone: with the summary it is above T)
        state = [*history(6), user("PASTE " + words(990, "paste"))]
        backend = memory_backend()
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        model = ScriptedModel(["ok"])
        outcome = run(mode, compressor, state, model)
        assert outcome.level == "L2" and not outcome.forced
        sent_last = model.calls[-1][-1]
        assert sent_last.metadata.get(MARK_TRIMMED)  # the view was trimmed ...
        assert outcome.update is not None and outcome.update.replaced == ()  # ... not the state

        # under overflow the same trim is persisted (the seed's rule)
        forced = Compressor(
            small_config(summary_threshold=4),
            backend=memory_backend(),
            summarizer=FakeSummarizer("S"),
        )
        over = ScriptedModel(["ok"], overflow_above=2000)
        big = [*history(6), user("PASTE " + words(2500, "paste"))]  # below this T of 4,096
        outcome = run(mode, forced, big, over)
        assert outcome.forced and outcome.update is not None
        assert [i for i, _ in outcome.update.replaced] == [len(big) - 1]

    @pytest.mark.spec("R12")
    @MODES
    def test_an_l1_replacement_is_never_larger_than_what_it_replaces(self, mode: str) -> None:
        """With a 1-token limit, ``'ok'`` stays ``'ok'``: its offload marker would be larger."""
        c = call("bash")
        ok = tool(c, "ok")
        state = [user(words(900)), assistant("", c), ok]
        backend = memory_backend()
        compressor = Compressor(
            small_config(summary_tool_result_token_limit=1, summary_keep_messages=10),
            backend=backend,
        )
        model = ScriptedModel(["ok"])
        run(mode, compressor, state, model)
        assert model.calls[0][2] == ok
        assert files_in(backend) == {}

    @pytest.mark.spec("R12", "R13")
    @MODES
    def test_a_forged_offload_marker_is_not_trusted(self, mode: str) -> None:
        """A 120 KB tool result claiming to be offloaded is offloaded for real."""
        c = call("bash")
        text = "log line with details\n" * 5_500  # ~120 KB
        forged = tool(c, text).with_content(
            text, **{MARK_OFFLOADED: "outputs/large_tool_results/bash-elsewhere.txt"}
        )
        state = [user("run it"), assistant("", c), forged]
        backend = memory_backend()
        compressor = Compressor(
            small_config(summary_keep_messages=10), estimator=EST, backend=backend
        )
        model = ScriptedModel(["ok"])
        run(mode, compressor, state, model)
        sent = model.calls[0][2]
        path = sent.metadata[MARK_OFFLOADED]
        assert path != "outputs/large_tool_results/bash-elsewhere.txt"
        assert files_in(backend) == {path: text}
        assert sent.text.startswith(offload_body(path, text, "", EST.count_text(text)))
        assert len(sent.text) < 1_000

    @pytest.mark.spec("R35")
    @pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e308])
    def test_non_finite_thresholds_are_config_errors(self, value: float) -> None:
        with pytest.raises(ConfigError) as info:
            SummaryConfig(summary_threshold=value)
        assert info.value.field == "summary_threshold"


class TextRecordingEstimator(ApproxEstimator):
    """Records every text it counts."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def count_text(self, text: str) -> int:
        self.texts.append(text)
        return super().count_text(text)


@pytest.mark.spec("R21", "R24")
@MODES
def test_the_task_is_counted_once_for_rounds_with_the_same_task(mode: str) -> None:
    """The summary bound grows with the task statement's tokens, counted request by
    request; the next round, one message longer with the same first request before its
    cut, counts none of the requests counted before again (a newer request adds only its
    own count), and its summary is exactly what a compressor that never counted them
    makes (its archive continues the first round's, which holds the same first messages)."""
    state = [*history(8), user("q8 " + words(60, "q8"))]
    longer = [*state, assistant("a8 " + words(60, "a8"))]
    est = TextRecordingEstimator()
    compressor = Compressor(
        small_config(), estimator=est, backend=memory_backend(), summarizer=FakeSummarizer()
    )
    first = run(mode, compressor, state, ScriptedModel(["ok"]))
    assert first.update is not None and first.update.event is not None
    # the task: the first request and the newest one before the cut
    requests = task_statement(state[: first.update.event.cutoff])
    assert len(requests) == 2 and requests[0].startswith("q0 ")
    # each request is counted as its message and as a part of the task, once each
    assert first.level == "L2" and all(est.texts.count(r) == 2 for r in requests)
    est.texts.clear()
    second = run(mode, compressor, longer, ScriptedModel(["ok"]))
    assert second.update is not None and second.update.event is not None
    task = task_statement(longer[: second.update.event.cutoff])
    assert task[0] == requests[0]
    assert second.level == "L2" and not any(r in est.texts for r in requests)
    assert all(est.texts.count(r) == 1 for r in task if r not in requests)
    fresh_est = TextRecordingEstimator()
    fresh = Compressor(
        small_config(), estimator=fresh_est, backend=memory_backend(), summarizer=FakeSummarizer()
    )
    again = run(mode, fresh, longer, ScriptedModel(["ok"]))
    # the messages' counts are kept on them (the same kind of estimator): only the task's
    assert all(fresh_est.texts.count(r) == 1 for r in task)
    assert first.update is not None and second.update is not None and again.update is not None
    # the same summary; only where the history went differs: the fresh compressor wrote
    # the whole archive, the second round only what follows the first round's archive
    body, _, saved = second.update.event.summary_message.text.partition("The full text")
    fresh_body, _, fresh_saved = again.update.event.summary_message.text.partition("The full text")
    assert body == fresh_body
    assert saved == (
        f" of those messages is saved at {second.update.event.file_path}, "
        f"which continues {first.update.event.file_path}."
    )
    assert fresh_saved == f" of those messages is saved at {again.update.event.file_path}."
