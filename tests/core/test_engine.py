"""The engine's flow, end to end on the core: the seed's six scenarios and more.

Every test checks the exact view the model received, the state update, the
bytes in the files and the stream events.
"""

from __future__ import annotations

import itertools
import json
import logging

import attrs
import pytest

from ars_core import (
    MARK_OFFLOADED,
    MARK_SUMMARY,
    MARK_TRIMMED,
    ApproxEstimator,
    Compressor,
    ContentPart,
    ContextOverflowError,
    Message,
    SummarizationEvent,
    SummarizerError,
    encode_sse,
    message_to_dict,
    read_history,
)
from ars_core.l1 import offload_body, sha256_text, truncation_marker
from ars_core.testing import (
    FailingBackend,
    FakeSummarizer,
    RecordingEmitter,
    ScriptedModel,
    capture_events,
)

from .helpers import assistant, call, files_in, memory_backend, small_config, tool, user, words

EST = ApproxEstimator()


def snapshot(messages: list[Message]) -> list[dict]:
    return [message_to_dict(m) for m in messages]


def long_history(n_pairs: int, size: int = 60) -> list[Message]:
    """user/assistant turns of ``size`` tokens each, no tool results to offload."""
    out: list[Message] = []
    for i in range(n_pairs):
        out.append(user(f"question {i}: " + words(size, f"q{i}")))
        out.append(assistant(f"answer {i}: " + words(size, f"a{i}")))
    return out


@pytest.mark.spec("R1")
class TestBelowThreshold:
    """Below the entry threshold nothing happens but the model call."""

    @pytest.mark.spec("R1")
    def test_below_threshold_calls_model_with_effective_messages(self) -> None:
        backend, emitter = memory_backend(), RecordingEmitter()
        state = [user("hello"), assistant("hi there")]
        before = snapshot(state)
        model = ScriptedModel(["reply"])
        engine = Compressor(small_config(), backend=backend, emitter=emitter)

        out = engine.call(state, model)

        assert out.response == "reply"
        assert model.calls == [state]
        assert all(a is b for a, b in zip(model.calls[0], state, strict=False))
        assert out.update is None and out.level is None
        assert emitter.events == [] and out.events == ()
        assert files_in(backend) == {}
        assert snapshot(state) == before

    @pytest.mark.spec("R10", "R24")
    def test_effective_messages_rebuilt_from_event(self) -> None:
        """With an event, the model gets [summary] + state[cutoff:]."""
        state = [user("a"), assistant("b"), user("c"), assistant("d")]
        summary = Message(role="user", content="S", metadata={MARK_SUMMARY: True})
        event = SummarizationEvent(cutoff=2, summary_message=summary)
        model = ScriptedModel()
        Compressor(small_config()).call(state, model, event=event)
        assert model.calls == [[summary, state[2], state[3]]]

    @pytest.mark.spec("R3")
    def test_system_and_tool_schemas_count_toward_the_threshold(self) -> None:
        """A request whose messages are small but whose system prompt and tool
        schemas push it over T starts a compression round."""
        state = [user("hello")]
        system = "You are helpful. " + words(600, "sys")
        tools = [
            {"name": "search", "description": words(500, "tool"), "parameters": {"type": "object"}}
        ]
        emitter = RecordingEmitter()
        engine = Compressor(small_config(), estimator=EST, emitter=emitter)
        assert EST.count(state) < 1024 <= EST.count(state, system=system, tools=tools)

        out = engine.call(state, ScriptedModel(), system=system, tools=tools)

        assert emitter.phases[0] == ("started", "L1")
        assert out.tokens_before == EST.count(state, system=system, tools=tools)


@pytest.mark.spec("R2", "R11", "R12", "R13", "R14")
class TestL1Only:
    """L1 alone brings the view under the L2 threshold."""

    def setup_state(self) -> tuple[list[Message], str, str]:
        code = "print('x')\n" * 400  # 4,400 characters
        big = "\n".join(f"line {i}: " + words(12, f"r{i}") for i in range(120))
        wf = call("write_file", file_path="app.py", content=code)
        bash = call("bash", command="cat big.log")
        state = [
            user("write the app and read the log"),
            assistant("", wf),
            tool(wf, "ok"),
            assistant("", bash),
            tool(bash, big),
            assistant("done"),
        ]
        return state, code, big

    @pytest.mark.spec("R5", "R11", "R12", "R14", "R30", "R31")
    def test_l1_view_files_and_events(self) -> None:
        state, code, big = self.setup_state()
        before = snapshot(state)
        backend, emitter = memory_backend(), RecordingEmitter()
        model = ScriptedModel(["fine"])
        engine = Compressor(small_config(), estimator=EST, backend=backend, emitter=emitter)
        assert EST.count(state) >= 1024

        out = engine.call(state, model)

        path = f"outputs/large_tool_results/bash-{sha256_text(big)}.txt"
        sent = model.calls[0]
        assert len(model.calls) == 1 and len(sent) == len(state)
        # the write_file argument is only a marker in the copy
        assert sent[1].tool_calls[0].args == {
            "file_path": "app.py",
            "content": truncation_marker("write_file", "content", code),
        }
        # the tool result is the path plus a preview within the same budget
        assert sent[4].metadata[MARK_OFFLOADED] == path
        assert sent[4].text.startswith(offload_body(path, big, "", EST.count_text(big)))
        assert path in sent[4].text and "Preview:\n" + big[:40] in sent[4].text
        assert EST.count_message(sent[4]) <= 120
        assert sent[4].tool_call_id == state[4].tool_call_id
        # untouched messages are the very same objects
        assert [sent[i] is state[i] for i in (0, 2, 3, 5)] == [True] * 4
        # the file holds the full original text
        assert files_in(backend) == {path: big}
        # no state change
        assert out.update is None and out.level == "L1"
        assert snapshot(state) == before
        # started then completed, L1 completed has no cutoff nor file path
        assert emitter.phases == [("started", "L1"), ("completed", "L1")]
        done = emitter.events[1].to_dict()
        assert "cutoff" not in done and "file_path" not in done
        assert done["offloaded"] == [path] and done["truncated_args"] == 1
        assert done["tokens_after"] < done["tokens_before"]

    @pytest.mark.spec("R13")
    def test_second_call_reuses_path_and_does_not_rewrite(self) -> None:
        state, _, _big = self.setup_state()
        backend = memory_backend()
        engine = Compressor(small_config(), backend=backend)
        m1, m2 = ScriptedModel(), ScriptedModel()
        engine.call(state, m1)
        writes: list[str] = []
        original = backend.write_text
        backend.write_text = lambda p, t: writes.append(p) or original(p, t)  # type: ignore[method-assign]
        engine.call([*state, user("again")], m2)
        assert m1.calls[0][4].text == m2.calls[0][4].text
        assert writes == []

    @pytest.mark.spec("R13")
    def test_marked_message_is_not_offloaded_again(self) -> None:
        """A message holding an offloaded body (it fits the limit) is sent as it is."""
        c = call("bash")
        path = "outputs/large_tool_results/bash-x.txt"
        marked = tool(c, words(400)).with_content(
            offload_body(path, words(400), words(40), 440), **{MARK_OFFLOADED: path}
        )
        state = [user(words(700)), assistant("", c), marked]
        backend = memory_backend()
        model = ScriptedModel()
        Compressor(small_config(summary_keep_messages=10), backend=backend).call(state, model)
        assert model.calls[0][2] is marked
        assert files_in(backend) == {}

    @pytest.mark.spec("R12")
    def test_failed_offload_keeps_original_text(self) -> None:
        """A failed L1 write never drops text from the view (T = 3K: the request is
        above T, its L1 view with the result still in it fits T)."""
        state, _, big = self.setup_state()
        backend = FailingBackend(["outputs/large_tool_results"])
        model = ScriptedModel()
        config = small_config(summary_keep_messages=10, summary_threshold=3)
        Compressor(config, backend=backend).call(state, model)
        assert model.calls[0][4] is state[4]
        assert backend.failed == [f"outputs/large_tool_results/bash-{sha256_text(big)}.txt"]

    @pytest.mark.spec("R37")
    def test_tool_name_is_sanitised_in_the_file_name(self) -> None:
        c = call("../../etc/passwd")
        state = [user("x"), assistant("", c), tool(c, words(1200))]
        backend = memory_backend()
        Compressor(small_config(summary_l2_trigger_ratio=1.0), backend=backend).call(
            state, ScriptedModel()
        )
        (path,) = files_in(backend)
        assert path == f"outputs/large_tool_results/etc_passwd-{sha256_text(state[2].text)}.txt"
        assert ".." not in path and "/etc/" not in path

    @pytest.mark.spec("R38")
    def test_same_content_same_path(self) -> None:
        text = words(500)
        c1, c2 = call("bash"), call("bash")
        state = [user("x"), assistant("", c1, c2), tool(c1, text), tool(c2, text), user(words(300))]
        backend = memory_backend()
        model = ScriptedModel()
        Compressor(small_config(summary_l2_trigger_ratio=1.0), backend=backend).call(state, model)
        assert (
            model.calls[0][2].metadata[MARK_OFFLOADED] == model.calls[0][3].metadata[MARK_OFFLOADED]
        )
        assert list(files_in(backend)) == [
            f"outputs/large_tool_results/bash-{sha256_text(text)}.txt"
        ]


def expected_cutoff(n: int, keep: int) -> int:
    return n - keep


@pytest.mark.spec("R20", "R21", "R22", "R23", "R24", "R25")
class TestL2:
    """L2 archives, summarizes and records a cumulative event."""

    @pytest.mark.spec("R5", "R20", "R23", "R24", "R27", "R30", "R31")
    def test_l2_archives_summarizes_and_records_the_event(self) -> None:
        """Above the L2 threshold the originals are archived, the summary is made from
        the cleaned history with the prompt, the event records it and the view is rebuilt."""
        state = long_history(8)  # 16 messages of ~65 tokens: ~1,100 tokens
        before = snapshot(state)
        backend, emitter = memory_backend(), RecordingEmitter()
        summarizer = FakeSummarizer("THE SUMMARY")
        model = ScriptedModel(["answer"])
        engine = Compressor(
            small_config(summary_max_tokens=64),
            backend=backend,
            emitter=emitter,
            summarizer=summarizer,
            summary_input_tokens=1024,
        )

        out = engine.call(state, model, thread="t-1")

        cut = 12  # keep the latest 4
        files = files_in(backend)
        (path,) = files
        assert path.startswith("outputs/conversation_history/history-000000-000012-")
        header, archived = read_history(files[path])
        assert header == {"ars_history": 1, "start": 0, "end": 12, "count": 12, "thread": "t-1"}
        assert [message_to_dict(m) for m in archived] == before[:12]  # the ORIGINAL messages
        # the summarizer got the cleaned history and the prompt template
        ((history, prompt),) = summarizer.calls
        assert history == state[:12] and "{messages}" in prompt
        # the event
        event = out.update.event
        assert event.cutoff == cut and event.file_path == path and event.previous_cutoff == 0
        assert "THE SUMMARY" in event.summary_message.text and path in event.summary_message.text
        assert event.summary_message.metadata[MARK_SUMMARY] is True
        assert event.summary_usage == summarizer.usage
        # the view sent: summary + the kept tail (same objects)
        assert model.calls == [[event.summary_message, *state[12:]]]
        assert out.update.replaced == ()
        assert snapshot(state) == before  # state messages are never rewritten
        # completed L2 carries cutoff, file path and the summary usage
        assert emitter.phases == [("started", "L1"), ("completed", "L2")]
        done = emitter.events[1].to_dict()
        assert done["cutoff"] == 12 and done["file_path"] == path
        assert done["summary_usage"] == {
            "input_tokens": 100,
            "output_tokens": 20,
            "total_tokens": 120,
        }

    @pytest.mark.spec("R21")
    def test_cutoff_never_splits_parallel_tool_calls(self) -> None:
        """The kept window would start inside a parallel call's results: the cut moves back
        to the assistant message that made the calls."""
        a, b, c = call("read"), call("read"), call("read")
        state = [
            *long_history(8),
            assistant("reading three files", a, b, c),
            tool(a, "A" * 50),
            tool(b, "B" * 50),
            tool(c, "C" * 50),
            assistant("done"),
        ]
        model = ScriptedModel()
        out = Compressor(
            small_config(summary_keep_messages=3, summary_max_tokens=64),
            summarizer=FakeSummarizer(),
        ).call(state, model)
        assert out.update.event.cutoff == 16  # the assistant with the three calls
        sent = model.calls[0]
        assert [m.role for m in sent] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
        assert {m.tool_call_id for m in sent[2:5]} == {a.id, b.id, c.id}

    @pytest.mark.spec("R25")
    def test_chained_summaries_grow_the_global_cutoff(self) -> None:
        backend = memory_backend()
        summarizer = FakeSummarizer(lambda prompt: f"summary #{prompt.count('[previous summary]')}")
        engine = Compressor(small_config(), backend=backend, summarizer=summarizer)
        state: list[Message] = []
        event = None
        cutoffs: list[int] = []
        for turn in range(30):
            state.append(user(f"q{turn} " + words(60, f"q{turn}")))
            model = ScriptedModel()
            out = engine.call(state, model, event=event)
            if out.update is not None:
                new = out.update.event
                assert new.previous_cutoff == (event.cutoff if event else 0)
                # the view is the new summary + state after the global cutoff
                assert model.calls[-1] == [new.summary_message, *state[new.cutoff :]]
                event = new
                cutoffs.append(event.cutoff)
            state.append(assistant(f"a{turn} " + words(60, f"a{turn}")))
        assert len(cutoffs) >= 3
        assert cutoffs == sorted(set(cutoffs))  # strictly growing
        # every archive covers exactly [previous_cutoff, cutoff) of the state
        for _path, text in files_in(backend).items():
            header, archived = read_history(text)
            assert snapshot(archived) == snapshot(state[header["start"] : header["end"]])
        ranges = sorted(
            (read_history(t)[0]["start"], read_history(t)[0]["end"])
            for t in files_in(backend).values()
        )
        assert ranges[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        # the later summaries saw the earlier ones
        assert "[previous summary]" in render(summarizer.calls[-1][0])

    @pytest.mark.spec("R44")
    def test_event_survives_json_and_rebuilds_the_same_view(self) -> None:
        state = long_history(8)
        out = Compressor(small_config(), summarizer=FakeSummarizer()).call(state, ScriptedModel())
        stored = json.loads(json.dumps(out.update.event.to_dict()))
        restored = SummarizationEvent.from_dict(stored)
        model = ScriptedModel()
        Compressor(small_config(summary_threshold=100)).call(state, model, event=restored)
        assert snapshot(model.calls[0]) == snapshot(list(out.view))


def render(messages: list[Message]) -> str:
    from ars_core.summarize import render_history

    return render_history(messages)


class NotASummary:
    """A summarizer that answers with something that is not a summary."""

    def summarize(self, messages: list[Message], prompt: str) -> object:
        return 42


@pytest.mark.spec("R26", "R40", "R41", "R42")
class TestFailures:
    """Failures degrade, they never lose the summary or the call."""

    @pytest.mark.spec("R26", "R40")
    def test_history_write_failure_still_summarizes_without_path(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        backend, emitter = FailingBackend(["outputs/conversation_history"]), RecordingEmitter()
        summarizer = FakeSummarizer("S")
        model = ScriptedModel(["ok"])
        state = long_history(8)
        with caplog.at_level(logging.WARNING, logger="ars"):
            out = Compressor(
                small_config(), backend=backend, summarizer=summarizer, emitter=emitter
            ).call(state, model)
        assert out.response == "ok"
        assert out.update.event.file_path is None
        assert len(summarizer.calls) == 1  # the summary still ran
        assert "S" in out.update.event.summary_message.text
        assert "saved at" not in out.update.event.summary_message.text
        assert backend.failed[0].startswith("outputs/conversation_history/")
        assert any("history archive write failed" in r.message for r in caplog.records)
        assert emitter.phases == [("started", "L1"), ("completed", "L2")]
        assert "file_path" not in emitter.events[1].to_dict()

    @pytest.mark.spec("R41")
    def test_summary_model_exception_is_not_raised(self) -> None:
        summarizer = FakeSummarizer(error=RuntimeError("summary backend down"))
        model = ScriptedModel(["ok"])
        state = long_history(8)
        with capture_events() as emitter:
            out = Compressor(small_config(), summarizer=summarizer).call(state, model)
        event = out.update.event
        assert out.response == "ok"
        assert "RuntimeError: summary backend down" in event.summary_message.text
        assert event.summary_error == "RuntimeError: summary backend down"
        assert event.summary_usage is None
        # the fallback keeps the task statement (never a bare placeholder)
        assert "question 0" in event.summary_message.text
        assert model.calls[0][0] is event.summary_message
        assert emitter.phases == [("started", "L1"), ("completed", "L2")]

    @pytest.mark.spec("R41")
    @pytest.mark.parametrize(
        ("summarizer", "recorded"),
        [
            (
                FakeSummarizer(error=SummarizerError("quota exhausted")),
                "SummarizerError: quota exhausted",
            ),
            (
                NotASummary(),
                "TypeError: a summarizer must return SummaryResult or str, not int",
            ),
        ],
        ids=["raises-summarizer-error", "returns-no-summary"],
    )
    @pytest.mark.anyio
    async def test_summary_failures_are_recorded_as_summarizer_errors(
        self, summarizer: object, recorded: str
    ) -> None:
        """Whatever a summary fails with becomes a SummarizerError whose reason
        the event records, sync and async; the call still succeeds."""
        engine = Compressor(small_config(), summarizer=summarizer)  # type: ignore[arg-type]
        for out in (
            engine.call(long_history(8), ScriptedModel(["ok"])),
            await engine.acall(long_history(8), ScriptedModel(["ok"]).acall),
        ):
            assert out.response == "ok" and out.update.event.summary_error == recorded
            assert f"[ARS: the summary model failed: {recorded}]" in (
                out.update.event.summary_message.text
            )

    @pytest.mark.spec("R42")
    def test_no_valid_cutoff_falls_back_to_l1_view(self) -> None:
        """Too few messages to summarize (and their L1 view fits T): the L1 view is sent
        and state is unchanged."""
        c = call("bash")
        state = [user(words(700)), assistant("", c), tool(c, words(900))]
        model = ScriptedModel()
        with capture_events() as emitter:
            out = Compressor(small_config()).call(state, model)
        assert out.update is None and out.level == "L1"
        assert model.calls[0][2].metadata.get(MARK_OFFLOADED)
        assert emitter.phases == [("started", "L1"), ("completed", "L1")]

    @pytest.mark.spec("R42")
    def test_no_cutoff_and_still_overflowing_propagates_and_fails(self) -> None:
        # one assistant message: nothing to summarize (a user message above T would be
        # offloaded and fit; with a message before it, L2 would summarize that one)
        state = [assistant(words(2000))]
        model = ScriptedModel(overflow_above=1500)
        with capture_events() as emitter, pytest.raises(ContextOverflowError):
            Compressor(small_config()).call(state, model)
        assert emitter.phases == [("started", "L1"), ("failed", "L1")]
        assert "ContextOverflowError" in emitter.events[1].error

    @pytest.mark.spec("R42")
    @pytest.mark.anyio
    async def test_no_valid_cutoff_warns_only_when_the_l1_view_is_above_t(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Too few messages to summarize while their L1 view fits T is one INFO line (no
        warning: nothing is lost, the request fits); an L1 view still above T is a
        WARNING, sync and async."""
        c = call("bash")
        fits = [user(words(700)), assistant("", c), tool(c, words(900))]
        above = [assistant(words(2000))]  # nothing to summarize, nothing to offload
        for state, level in ((fits, logging.INFO), (above, logging.WARNING)):
            for mode in ("sync", "async"):
                caplog.clear()
                with caplog.at_level(logging.INFO, logger="ars"):
                    if mode == "sync":
                        out = Compressor(small_config()).call(state, ScriptedModel())
                    else:
                        out = await Compressor(small_config()).acall(state, ScriptedModel().acall)
                assert out.update is None and out.level == "L1"
                lines = [
                    (rec.levelno, rec.getMessage())
                    for rec in caplog.records
                    if "no valid cutoff" in rec.getMessage()
                ]
                assert len(lines) == 1 and lines[0][0] == level, (mode, lines)
                assert ("within the threshold" in lines[0][1]) == (level == logging.INFO)
                assert not [r for r in caplog.records if r.levelno >= logging.WARNING] or (
                    level == logging.WARNING
                )

    @pytest.mark.spec("R32")
    def test_main_model_error_after_start_emits_failed(self) -> None:
        def broken(view: list[Message]) -> str:
            raise ValueError("provider 500")

        engine = Compressor(small_config(), summarizer=FakeSummarizer())
        with capture_events() as emitter, pytest.raises(ValueError, match="provider 500"):
            engine.call(long_history(8), broken)
        assert emitter.phases == [("started", "L1"), ("failed", "L2")]
        assert emitter.events[1].error == "ValueError: provider 500"

    @pytest.mark.spec("R32")
    def test_error_below_threshold_emits_nothing(self) -> None:
        emitter = RecordingEmitter()

        def broken(view: list[Message]) -> str:
            raise ValueError("provider 500")

        with pytest.raises(ValueError):
            Compressor(small_config(), emitter=emitter).call([user("hi")], broken)
        assert emitter.events == []

    def test_emitter_failure_does_not_break_the_call(self) -> None:
        def bad_emitter(event: object) -> None:
            raise RuntimeError("observer bug")

        out = Compressor(small_config(), emitter=bad_emitter, summarizer=FakeSummarizer()).call(
            long_history(8), ScriptedModel(["ok"])
        )
        assert out.response == "ok" and out.level == "L2"


@pytest.mark.spec("R4", "R22", "R43")
class TestOverflow:
    """A context overflow forces compression, and the tail is trimmed."""

    @pytest.mark.spec("R4")
    def test_overflow_below_threshold_forces_l2_and_retries(self) -> None:
        state = long_history(6)  # ~800 tokens: below T=1,024
        emitter = RecordingEmitter()
        model = ScriptedModel(["ok"], overflow_above=600)
        out = Compressor(
            small_config(summary_max_tokens=64), emitter=emitter, summarizer=FakeSummarizer("S")
        ).call(state, model)
        assert len(model.calls) == 2 and model.calls[0] == state
        assert model.calls[1] == [out.update.event.summary_message, *state[8:]]
        assert out.forced and out.level == "L2" and out.response == "ok"
        # on the forced path `started` comes when L2 begins
        assert emitter.phases == [("started", "L2"), ("completed", "L2")]
        assert all(e.forced for e in emitter.events)

    @pytest.mark.spec("R4")
    def test_langchain_style_overflow_errors_are_recognised(self) -> None:
        class ContextOverflowError(
            Exception
        ):  # e.g. langchain_core.exceptions.ContextOverflowError
            pass

        class APIStatusError(Exception):
            status_code = 400

        for exc in (
            ContextOverflowError("too big"),
            APIStatusError("prompt is too long: 210000 tokens"),
        ):
            calls: list[int] = []

            def model(view: list[Message], exc: Exception = exc, calls: list[int] = calls) -> str:
                calls.append(len(view))
                if len(calls) == 1:
                    raise exc
                return "ok"

            out = Compressor(small_config(), summarizer=FakeSummarizer()).call(
                long_history(6), model
            )
            assert out.forced and out.response == "ok" and len(calls) == 2

    @pytest.mark.spec("R22", "R43")
    def test_overflow_trims_the_kept_tail_and_persists_it_by_id(self) -> None:
        huge = "LOG " + words(480, "huge")
        # the huge message is the newest: the smallest kept part, and still too big
        state = [*long_history(2), user("next"), assistant("ok"), user(huge)]
        assert 700 < EST.count(state) < 1024  # below T, above what the model accepts
        backend, emitter = memory_backend(), RecordingEmitter()
        model = ScriptedModel(["done"], overflow_above=700)
        out = Compressor(
            small_config(summary_max_tokens=64),
            backend=backend,
            emitter=emitter,
            summarizer=FakeSummarizer("S"),
        ).call(state, model)
        event = out.update.event
        assert event.cutoff == 6
        ((index, trimmed),) = out.update.replaced
        assert index == 6 and trimmed.id == state[6].id and trimmed.role == "user"
        path = trimmed.metadata[MARK_TRIMMED]
        assert path.startswith("outputs/trimmed_messages/user-") and path in trimmed.text
        # the file holds the original message, losslessly
        assert json.loads(files_in(backend)[path]) == message_to_dict(state[6])
        # what was sent is exactly summary + trimmed tail; the state is untouched
        assert len(model.calls) == 2 and model.calls[0] == state
        assert model.calls[-1] == [event.summary_message, trimmed]
        assert out.tokens_after <= small_config(summary_max_tokens=64).l2_threshold_tokens
        assert state[6].text == huge
        assert emitter.phases == [("started", "L2"), ("completed", "L2")]


@pytest.mark.spec("R26")
class TestAsync:
    """The async path runs archive and summary at the same time."""

    @pytest.mark.anyio
    @pytest.mark.spec("R26")
    async def test_async_archive_and_summary_run_concurrently(self) -> None:
        import anyio

        archive_started, summary_started = anyio.Event(), anyio.Event()
        inner = memory_backend()

        class WaitingBackend:
            def write_text(self, path: str, text: str) -> str:
                return inner.write_text(path, text)

            def read_text(self, path: str) -> str:
                return inner.read_text(path)

            def exists(self, path: str) -> bool:
                return inner.exists(path)

            async def awrite_text(self, path: str, text: str) -> str:
                archive_started.set()
                await summary_started.wait()  # deadlocks unless the summary runs meanwhile
                return inner.write_text(path, text)

        async def gate() -> None:
            summary_started.set()
            await archive_started.wait()

        summarizer = FakeSummarizer("S", gate=gate)

        async def model(view: list[Message]) -> str:
            return "async ok"

        with anyio.fail_after(5):
            out = await Compressor(
                small_config(summary_max_tokens=64), backend=WaitingBackend(), summarizer=summarizer
            ).acall(long_history(8), model)
        assert out.response == "async ok" and out.update.event.file_path in files_in(inner)

    @pytest.mark.spec("R26")
    def test_sync_path_writes_history_before_summarizing(self) -> None:
        order: list[str] = []
        inner = memory_backend()

        class OrderBackend:
            def write_text(self, path: str, text: str) -> str:
                order.append("archive")
                return inner.write_text(path, text)

            def read_text(self, path: str) -> str:
                return inner.read_text(path)

            def exists(self, path: str) -> bool:
                return inner.exists(path)

        summarizer = FakeSummarizer(lambda p: order.append("summary") or "S")
        Compressor(small_config(), backend=OrderBackend(), summarizer=summarizer).call(
            long_history(8), ScriptedModel()
        )
        assert order == ["archive", "summary"]

    @pytest.mark.anyio
    async def test_async_and_sync_paths_agree(self) -> None:
        state = long_history(8)
        s_model, a_model = ScriptedModel(), ScriptedModel()
        s_out = Compressor(small_config(), summarizer=FakeSummarizer("S")).call(state, s_model)
        a_out = await Compressor(small_config(), summarizer=FakeSummarizer("S")).acall(
            state, a_model.acall
        )
        assert snapshot(s_model.calls[0]) == snapshot(a_model.calls[0])
        assert attrs.evolve(s_out.update.event, created_at="") == attrs.evolve(
            a_out.update.event, created_at=""
        )


class TestContentKinds:
    """CJK text and multimodal parts go through L1 correctly."""

    def test_cjk_tool_result_preview_fits_the_budget(self) -> None:
        text = "上下文压缩分为两级，第一级只在副本上截短过长的工具结果。" * 60
        c = call("search")
        state = [user("查一下"), assistant("", c), tool(c, text)]
        backend, model = memory_backend(), ScriptedModel()
        Compressor(small_config(summary_l2_trigger_ratio=1.0), estimator=EST, backend=backend).call(
            state, model
        )
        sent = model.calls[0][2]
        assert EST.count_message(sent) <= 120
        assert "上下文压缩" in sent.text
        assert files_in(backend) == {
            f"outputs/large_tool_results/search-{sha256_text(text)}.txt": text
        }

    def test_multimodal_tool_result_keeps_its_image_parts(self) -> None:
        image = ContentPart(
            type="image",
            data={"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        )
        c = call("screenshot")
        text = words(800)
        result = Message(
            role="tool",
            content=(ContentPart(type="text", text=text), image),
            tool_call_id=c.id,
            name="screenshot",
            id="t1",
        )
        state = [user("look"), assistant("", c), result]
        model = ScriptedModel()
        Compressor(small_config(summary_l2_trigger_ratio=1.0)).call(state, model)
        sent = model.calls[0][2]
        assert isinstance(sent.content, tuple) and sent.content[1] == image
        assert sent.content[0].text.startswith("[ARS: tool result offloaded")


@pytest.mark.spec("R33")
def test_events_map_to_sse_frames() -> None:
    emitter = RecordingEmitter()
    Compressor(small_config(), emitter=emitter, summarizer=FakeSummarizer()).call(
        long_history(8), ScriptedModel()
    )
    frames = [encode_sse(e) for e in emitter.events]
    for frame, event in zip(frames, emitter.events, strict=False):
        lines = frame.split("\n")
        assert lines[0] == "event: context_compression"
        assert lines[1].startswith("data: ") and frame.endswith("\n\n")
        assert json.loads(lines[1][6:]) == event.to_dict()
    assert json.loads(frames[1].split("\n")[1][6:])["phase"] == "completed"


class TestCompact:
    """`compact` builds the view without a model call (memories whose caller calls the model)."""

    @pytest.mark.spec("R4")
    def test_forced_compact_runs_l2_without_calling_a_model(self) -> None:
        state = long_history(4)  # below T
        emitter = RecordingEmitter()
        out = Compressor(
            small_config(summary_max_tokens=64), summarizer=FakeSummarizer("S"), emitter=emitter
        ).compact(state, force=True)
        assert out.response is None and out.forced
        assert list(out.view) == [out.update.event.summary_message, *state[4:]]
        assert emitter.phases == [("started", "L2"), ("completed", "L2")]

    @pytest.mark.spec("R1")
    def test_compact_below_threshold_changes_nothing(self) -> None:
        state = long_history(2)
        out = Compressor(small_config()).compact(state)
        assert out.view == state and out.update is None and out.events == ()

    @pytest.mark.anyio
    async def test_acompact_matches_compact(self) -> None:
        state = long_history(8)
        sync = Compressor(small_config(), summarizer=FakeSummarizer("S")).compact(state)
        async_ = await Compressor(small_config(), summarizer=FakeSummarizer("S")).acompact(state)
        assert snapshot(list(sync.view)) == snapshot(list(async_.view))


@pytest.mark.spec("R4")
class TestOverflowClassification:
    """Which provider errors count as a context overflow."""

    @pytest.mark.parametrize(
        ("text", "status", "overflow"),
        [
            ("prompt is too long: 210000 tokens > 200000 maximum", 400, True),
            ("This model's maximum context length is 128000 tokens", None, True),
            ("Error code: 400 - {'code': 'context_length_exceeded'}", 400, True),
            ("input token count 1200000 exceeds the maximum", None, True),
            ("Rate limit reached: tokens per min (TPM): limit 30000", 429, False),
            ("Rate limit reached for requests, token limit per min", None, False),
            ("Internal server error", 500, False),
            ("prompt is too long", 500, False),
        ],
    )
    @pytest.mark.spec("R4")
    def test_provider_overflow_texts_are_classified(
        self, text: str, status: int | None, overflow: bool
    ) -> None:
        from ars_core import is_context_overflow

        exc = Exception(text)
        exc.status_code = status  # type: ignore[attr-defined]
        assert is_context_overflow(exc) is overflow

    @pytest.mark.spec("R4")
    def test_wrapped_errors_are_followed(self) -> None:
        from ars_core import is_context_overflow

        try:
            try:
                raise ContextOverflowError("too big")
            except ContextOverflowError as inner:
                raise RuntimeError("retry failed") from inner
        except RuntimeError as outer:
            assert is_context_overflow(outer)


@pytest.mark.spec("R3")
class TestCalibration:
    """The provider's usage is the truth; a calibrated estimator moves the thresholds."""

    def test_calibrated_scale_lowers_the_effective_threshold(self) -> None:
        est = ApproxEstimator()
        state = long_history(6)  # ~840 estimated tokens: below T=1,024
        assert est.count(state) < 1024
        for _ in range(10):  # the provider keeps reporting 1.5x our estimates
            est.calibrate(estimated=1000, actual=1500)
        assert 1.4 < est.scale <= 1.5
        emitter = RecordingEmitter()
        Compressor(
            small_config(), estimator=est, emitter=emitter, summarizer=FakeSummarizer()
        ).call(state, ScriptedModel())
        assert emitter.phases[0] == ("started", "L1")  # 840 * 1.5 > 1,024
        assert emitter.events[0].threshold == 1024  # events report the configured T

    def test_calibration_ignores_nonsense(self) -> None:
        est = ApproxEstimator()
        assert est.calibrate(estimated=0, actual=100) == 1.0
        assert est.calibrate(estimated=100, actual=-1) == 1.0
        est.calibrate(estimated=100, actual=100_000)
        assert est.scale <= 2.0


@pytest.mark.spec("R4", "R42")
def test_forced_path_without_cutoff_reports_started_and_failed() -> None:
    """Below T, overflow, no valid cutoff, the L1 view overflows too: the error propagates
    and the round is reported as started + failed (a failing round is reported even on the quiet forced path).
    One message: nothing can be summarized (two would be cut, see
    ``test_large_task.py::test_after_a_context_overflow_the_summary_keeps_the_ordinary_bound``)."""
    state = [user(words(700))]
    emitter = RecordingEmitter()
    with pytest.raises(ContextOverflowError):
        Compressor(small_config(), emitter=emitter).call(state, ScriptedModel(overflow_above=300))
    assert emitter.phases == [("started", "L1"), ("failed", "L1")]
    assert all(e.forced for e in emitter.events)
