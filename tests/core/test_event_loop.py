"""The event loop is never blocked: ``acall`` counts large new content in a worker thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from ars_core import ApproxEstimator, Compressor, Message, TiktokenEstimator, read_messages
from ars_core._tiktoken_offline import load_encoding
from ars_core.effects import AsyncEffects, SyncEffects, Write
from ars_core.estimate import OFFLOAD_CHARS, uncounted_chars
from ars_core.l1 import FileWrite
from ars_core.testing import FakeSummarizer, ScriptedModel
from ars_core.write_ledger import WrittenPaths

from .helpers import assistant, call, small_config, tool, user
from .test_estimate import traced_peak


class ThreadRecordingEstimator(ApproxEstimator):
    """Records the thread each text of more than 1,000 characters was counted on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []
        self.texts: list[str] = []  #: those texts, in order

    def count_text(self, text: str) -> int:
        if len(text) > 1000:
            self.threads.append(threading.get_ident())
            self.texts.append(text)
        return super().count_text(text)


def big_result() -> list[Message]:
    c = call("bash", "call_read_log", command="cat build.log")
    return [user("read the log"), assistant("", c), tool(c, "line of log\n" * 60_000)]


def tool_of(lines: int) -> Message:
    """The result of ``big_result``'s call, ``lines`` lines long (below the offload size)."""
    c = call("bash", "call_read_log", command="cat build.log")
    return tool(c, "line of log\n" * lines)


@pytest.mark.spec("R26")
class TestLoopNeverBlocked:
    @pytest.mark.anyio
    async def test_large_new_content_is_counted_off_the_event_loop(self) -> None:
        est = ThreadRecordingEstimator()
        state = big_result()
        assert uncounted_chars(est, state) >= OFFLOAD_CHARS
        model = ScriptedModel(["done"])
        out = await Compressor(small_config(), estimator=est).acall(state, model)
        loop_thread = threading.get_ident()
        assert est.threads and loop_thread not in est.threads
        # L1 offloaded the result: the model saw the path and a preview, not 660 KB
        assert len(model.calls[0][2].text) < 5_000 and out.level in ("L1", "L2")

    @pytest.mark.anyio
    async def test_small_new_content_stays_on_the_loop(self) -> None:
        """Per-call work stays cheap: a short new message is counted in place."""
        est = ThreadRecordingEstimator()
        state = [user("x" * 2000)]
        await Compressor(small_config(), estimator=est).acall(state, ScriptedModel())
        assert est.threads == [threading.get_ident()]

    @pytest.mark.anyio
    async def test_acall_and_call_agree_on_offloaded_content(self) -> None:
        sync_model, async_model = ScriptedModel(["a"]), ScriptedModel(["a"])
        sync_out = Compressor(small_config(), estimator=ApproxEstimator()).call(
            big_result(), sync_model
        )
        async_out = await Compressor(small_config(), estimator=ApproxEstimator()).acall(
            big_result(), async_model
        )
        assert [m.text for m in sync_model.calls[0]] == [m.text for m in async_model.calls[0]]
        assert sync_out.tokens_before == async_out.tokens_before

    @pytest.mark.anyio
    @pytest.mark.spec("R3")
    async def test_new_content_is_counted_once_between_the_trigger_and_l1(self) -> None:
        """The trigger's count of the big tool result is the one L1 uses: its text is
        read once per call, sync or async (offloaded to a thread or not)."""
        for make_state in (big_result, lambda: [*big_result()[:2], tool_of(5_000)]):
            for run_async in (False, True):
                est = ThreadRecordingEstimator()
                state = make_state()
                model = ScriptedModel(["done"])
                engine = Compressor(small_config(), estimator=est)
                if run_async:
                    out = await engine.acall(state, model)
                else:
                    out = engine.call(state, model)
                assert out.level in ("L1", "L2") and len(model.calls[0][2].text) < 5_000
                assert est.texts.count(state[2].text) == 1, (make_state, run_async)

    def test_uncounted_chars_stops_at_the_first_counted_message(self) -> None:
        est = ApproxEstimator()
        history = [user("a" * 100) for _ in range(50)]
        est.count_history(history)
        grown = [*history, user("b" * 300), user("c" * 200)]
        assert uncounted_chars(est, grown) == 500
        assert uncounted_chars(est, history) == 0


@pytest.mark.spec("R3")
def test_exact_count_of_long_texts_is_exact_and_memory_stays_proportional(
    trajectories_dir: Path,
) -> None:
    """o200k counts a long text piece by piece (cut where BPE cuts anyway): the same
    count as one encode, with a fraction of its memory."""
    enc = load_encoding("o200k_base")
    est = TiktokenEstimator("o200k_base")
    for path in sorted(trajectories_dir.glob("*.jsonl.gz"))[::4]:
        text = "\n".join(m.text for m in read_messages(path))
        assert est.count_text(text) == len(enc.encode_ordinary(text))
    peak = traced_peak(
        "from ars_core import TiktokenEstimator\nest = TiktokenEstimator('o200k_base')",
        "big = 'FAILED tests/test_io.py::test_case_17 - AssertionError: 0x1f != 0x2e\\n' * 150_000",
        "est.count_text(big)",
    )
    assert peak < 10_350_000 // 2


class SyncOnlyBackend:
    """A file backend with only blocking methods: ``acall`` writes to it in a thread.
    ``writes`` lists the paths it was asked to write."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.writes: list[str] = []

    def write_text(self, path: str, text: str) -> str:
        self.writes.append(path)
        self.files[path] = text
        return path

    def read_text(self, path: str) -> str:
        return self.files[path]

    def exists(self, path: str) -> bool:
        return path in self.files


@pytest.mark.spec("R13", "R26")
@pytest.mark.anyio
async def test_a_write_with_every_file_already_written_takes_no_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A warm round yields its offloads' :class:`Write` again; when this process already
    wrote every file of it, the event loop neither hops to a thread nor calls the backend."""
    backend = SyncOnlyBackend()
    effects = AsyncEffects(SyncEffects(None, FakeSummarizer("S"), backend, print, WrittenPaths()))
    hops: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(fn)
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    files = Write((FileWrite("outputs/a.txt", text="A"), FileWrite("outputs/b.txt", text="B")))
    assert await effects.write(files) == set()
    assert len(hops) == 1 and backend.writes == ["outputs/a.txt", "outputs/b.txt"]
    assert await effects.write(files) == set()
    assert len(hops) == 1 and len(backend.writes) == 2  # no hop, nothing written again
    grown = Write((*files.writes, FileWrite("outputs/c.txt", text="C")))
    assert await effects.write(grown) == set()  # a new file: written in a thread, alone
    assert len(hops) == 2 and backend.writes[2:] == ["outputs/c.txt"]
