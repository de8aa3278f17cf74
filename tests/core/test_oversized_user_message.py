"""A user message larger than the entry threshold can never be sent whole: in
the view its body goes to a content-addressed file with a head-and-tail
preview (the large-tool-result rule, applied only above T); the state keeps
the original."""

from __future__ import annotations

import pytest

from ars_core import MARK_OFFLOADED, ApproxEstimator, Compressor, message_to_dict
from ars_core.l1 import offload_body, sha256_text
from ars_core.testing import RecordingEmitter, ScriptedModel

from .helpers import assistant, call, files_in, memory_backend, small_config, tool, user, words

EST = ApproxEstimator()


def huge_request() -> str:
    """About 1,500 tokens (T is 1,024): a pasted log whose last line matters."""
    return "Please fix the failing build. " + words(1500, "log") + " FINAL: error E42 at line 7"


def check_offloaded_view(sent_text: str, original: str, path: str, preview_budget: int) -> None:
    """The exact header, the head and the tail of the original, within the budget."""
    header = offload_body(path, original, "", EST.count_text(original), user=True)
    assert sent_text.startswith(header + "\nPreview:\n")
    preview = sent_text[len(header) + len("\nPreview:\n") :]
    assert original.startswith(preview.split("\n[... ")[0])
    assert preview.endswith("error E42 at line 7")
    assert EST.count_text(sent_text) <= preview_budget


@pytest.mark.spec("R10", "R12", "R13", "R5")
class TestOversizedUserMessage:
    def test_user_message_above_t_is_offloaded_in_the_view_only(self) -> None:
        """The view holds the path and a preview, the file holds the exact
        original, the state is untouched and the round is an L1 round."""
        text = huge_request()
        state = [user(text)]
        before = [message_to_dict(m) for m in state]
        backend, model, emitter = memory_backend(), ScriptedModel(), RecordingEmitter()
        outcome = Compressor(small_config(), estimator=EST, backend=backend).call(
            state, model, emitter=emitter
        )
        path = f"outputs/large_user_messages/user-{sha256_text(text)}.txt"
        (sent,) = model.calls[0]
        assert sent.role == "user" and sent.id == state[0].id
        assert sent.metadata[MARK_OFFLOADED] == path
        check_offloaded_view(sent.text, text, path, 120 + 8)
        assert files_in(backend) == {path: text}
        assert [message_to_dict(m) for m in state] == before
        assert outcome.update is None and outcome.level == "L1"
        assert [(e.phase, e.level, e.offloaded) for e in emitter.events] == [
            ("started", "L1", ()),
            ("completed", "L1", (path,)),
        ]

    def test_user_message_below_t_is_never_offloaded(self) -> None:
        """Above the L1 trigger but each user message below T: sent unchanged (the large
        tool result between them is what L1 offloads to fit T)."""
        first, second = user(words(300, "a")), user(words(300, "b"))
        c = call("bash")
        state = [first, assistant("", c), tool(c, words(600, "log")), second]
        backend, model = memory_backend(), ScriptedModel()
        Compressor(small_config(summary_l2_trigger_ratio=1.0), estimator=EST, backend=backend).call(
            state, model
        )
        (sent,) = model.calls
        assert sent[0] is first and sent[3] is second and sent[1] is state[1]
        assert [p.split("/")[1] for p in files_in(backend)] == ["large_tool_results"]

    def test_same_text_same_file_written_once(self) -> None:
        """Two calls over the same oversized message send the same view and
        map to one file."""
        text = huge_request()
        state = [user(text)]
        backend, model = memory_backend(), ScriptedModel()
        engine = Compressor(small_config(), estimator=EST, backend=backend)
        engine.call(state, model)
        engine.call([*state, assistant("on it"), user("go on")], model)
        assert model.calls[0][0] == model.calls[1][0]
        assert list(files_in(backend)) == [
            f"outputs/large_user_messages/user-{sha256_text(text)}.txt"
        ]

    @pytest.mark.anyio
    async def test_async_path_offloads_the_same_way(self) -> None:
        """``acall`` sends the same view and writes the same file."""
        text = huge_request()
        state = [user(text)]
        backend, model = memory_backend(), ScriptedModel()
        await Compressor(small_config(), estimator=EST, backend=backend).acall(state, model)
        path = f"outputs/large_user_messages/user-{sha256_text(text)}.txt"
        check_offloaded_view(model.calls[0][0].text, text, path, 120 + 8)
        assert files_in(backend) == {path: text}
