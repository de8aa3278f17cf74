"""L1 offloads inline base64 media of the view to content-addressed files
(R10, R12, R13, R5): an OpenAI ``data:`` URL, an Anthropic base64 source, a
LangChain v1 ``base64`` block; the state keeps the original, media the model
has not answered yet stay, small ones stay, a failed write keeps the
original, and stable views repeat the offloaded form. Through
:class:`Compressor`, sync and async."""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import pytest

from ars_core import (
    ApproxEstimator,
    CallOutcome,
    Compressor,
    ContentPart,
    Message,
    ToolCall,
    describe_event,
)
from ars_core.estimate import message_tokens
from ars_core.l1 import OFFLOAD_HEADER
from ars_core.l1_media import MARK_MEDIA_OFFLOADED
from ars_core.messages import MARK_OFFLOADED
from ars_core.paths import text_sha256
from ars_core.testing import FailingBackend, FakeSummarizer, ScriptedModel, capture_events

from .helpers import files_in, memory_backend, png, small_config, words

EST = ApproxEstimator()
MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def image_part(form: str, payload: str) -> ContentPart:
    """The image as each format carries it, read the way the core reads it."""
    if form == "openai":
        url = {"url": f"data:image/png;base64,{payload}"}
        return ContentPart(type="image", data={"type": "image_url", "image_url": url})
    if form == "anthropic":
        source = {"type": "base64", "media_type": "image/png", "data": payload}
        return ContentPart(type="image", data={"type": "image", "source": source})
    return ContentPart(
        type="image", data={"type": "image", "base64": payload, "mime_type": "image/png"}
    )


def reference(payload: str) -> tuple[str, str]:
    path = f"outputs/media/image-{text_sha256(payload)}.png.b64"
    text = (
        f"[ARS: inline image, image/png data ({len(payload):,} base64 characters) offloaded "
        f"to {path}; the original is kept in the conversation state]"
    )
    return path, text


def run(mode: str, compressor: Compressor, state: list[Message], **kw: Any) -> CallOutcome:
    model = ScriptedModel(["ok"])
    if mode == "sync":
        return compressor.call(state, model, **kw)

    async def go() -> CallOutcome:
        return await compressor.acall(state, model.acall, **kw)

    return anyio.run(go)


def chat(form: str, images: list[str]) -> list[Message]:
    """Three user turns with an image each (the last one not answered yet)."""
    questions = ["look at this chart", "and this table?", "compare them"]
    out: list[Message] = []
    for i, (question, payload) in enumerate(zip(questions, images, strict=True)):
        content = (ContentPart(type="text", text=question), image_part(form, payload))
        out.append(Message(role="user", content=content, id=f"u{i}"))
        if i < 2:
            out.append(Message(role="assistant", content=f"answer {i} " + words(40), id=f"a{i}"))
    return out


@pytest.mark.spec("R10", "R12", "R13", "R5")
class TestInlineMediaOffload:
    @MODES
    @pytest.mark.parametrize("form", ["openai", "anthropic", "langchain_v1"])
    def test_answered_inline_images_go_to_files_and_the_state_keeps_them(
        self, mode: str, form: str
    ) -> None:
        """Three 640x480 images (~425 tokens each) put the request above T: L1
        writes the two the model already answered to ``outputs/media/`` (the
        base64 text, exactly) and sends a reference in their place; the
        unanswered third stays; the state is untouched; no L2 round."""
        images = [b64(png(640, 480, f"{form}-{i}")) for i in range(3)]
        state = chat(form, images)
        before = [m.content for m in state]
        backend = memory_backend()
        compressor = Compressor(
            small_config(summary_l2_trigger_ratio=0.9), estimator=EST, backend=backend
        )
        with capture_events() as captured:
            out = run(mode, compressor, state)

        (path0, text0), (path1, text1) = reference(images[0]), reference(images[1])
        assert out.level == "L1" and out.update is None
        view = list(out.view)
        assert view[0].content == (
            ContentPart(type="text", text="look at this chart"),
            ContentPart(type="text", text=text0),
        )
        assert view[0].metadata[MARK_MEDIA_OFFLOADED] == [path0]
        assert view[2].content == (
            ContentPart(type="text", text="and this table?"),
            ContentPart(type="text", text=text1),
        )
        assert view[1] is state[1] and view[3] is state[3]
        assert view[4] is state[4]  # not answered yet: sent as it is
        assert files_in(backend) == {path0: images[0], path1: images[1]}
        assert base64.b64decode(files_in(backend)[path0]) == png(640, 480, f"{form}-0")
        assert [m.content for m in state] == before
        assert captured.phases == [("started", "L1"), ("completed", "L1")]
        assert captured.events[-1].offloaded == (path0, path1)
        done = captured.events[-1]
        saved = sum(message_tokens(EST, state[i]) - message_tokens(EST, view[i]) for i in (0, 2))
        assert done.tokens_after == done.tokens_before - saved and saved > 600
        assert describe_event(done).endswith(f"2 inline media parts offloaded to {path0}, {path1}")

    @MODES
    def test_small_inline_images_stay_in_the_view(self, mode: str) -> None:
        """A 2x2 icon (~100 base64 characters, under the 480-character limit of a
        120-token tool-result limit) is not worth a file: it stays."""
        icon = b64(png(2, 2, "icon"))
        assert len(icon) < 480
        big = b64(png(640, 480, "big"))
        state = chat("openai", [icon, big, big])
        backend = memory_backend()
        config = small_config(summary_l2_trigger_ratio=1.0)
        out = run(mode, Compressor(config, estimator=EST, backend=backend), state)
        assert out.level == "L1" and out.view[0] is state[0]
        path, text = reference(big)
        assert out.view[2].content[1] == ContentPart(type="text", text=text)
        assert files_in(backend) == {path: big}

    @MODES
    def test_a_failed_media_write_keeps_the_image_in_the_view(self, mode: str) -> None:
        """Nothing leaves the view unsaved: the write fails, the original goes out."""
        images = [b64(png(640, 480, f"fail-{i}")) for i in range(3)]
        state = chat("anthropic", images)
        backend = FailingBackend(["outputs/media"])
        config = small_config(summary_keep_messages=10)  # no L2: the L1 view is sent
        # (the fixed rounds: lean rounds would cut a view left above T by the failed writes)
        compressor = Compressor(config, estimator=EST, backend=backend, lean_rounds=False)
        out = run(mode, compressor, state)
        assert list(out.view) == state
        assert sorted(backend.failed) == sorted(reference(p)[0] for p in images[:2])

    @MODES
    def test_after_l2_the_kept_image_message_keeps_its_offloaded_form(self, mode: str) -> None:
        """An L2 round keeps an answered image message in its tail: the view and
        the event's sent forms hold the reference (the persisted event carries
        no base64); the next call, below T, sends the very same form."""
        images = [b64(png(640, 480, f"l2-{i}")) for i in range(3)]
        filler: list[Message] = []
        for i in range(6):
            filler += [
                # short questions: the first and the newest are the summary's task section
                Message(role="user", content=f"q{i} " + words(20, f"q{i}"), id=f"fq{i}"),
                Message(role="assistant", content=f"r{i} " + words(140, f"r{i}"), id=f"fr{i}"),
            ]
        state = [*filler, *chat("langchain_v1", images)]
        backend = memory_backend()
        compressor = Compressor(
            small_config(summary_keep_messages=5),
            lean_rounds=False,  # the fixed rounds keep the 5 latest (the image messages)
            estimator=EST,
            backend=backend,
            summarizer=FakeSummarizer("SUMMARY"),
        )
        first = run(mode, compressor, state)
        assert first.level == "L2"
        event = first.update.event  # type: ignore[union-attr]
        assert event.cutoff == len(filler)
        path0, text0 = reference(images[0])
        assert first.view[1].content[1] == ContentPart(type="text", text=text0)
        assert first.view[-1] is state[-1]
        persisted = json.dumps(event.to_dict())
        assert not any(p in persisted for p in images[:2]) and text0 in persisted

        later = [*state, Message(role="assistant", content="compared", id="a2")]
        second = run(mode, compressor, later, event=type(event).from_dict(event.to_dict()))
        assert second.level is None  # below T: no round, the sent forms repeat
        assert second.view[: len(first.view)] == first.view
        assert files_in(backend)[path0] == images[0]


@pytest.mark.spec("R12", "R13")
class TestScreenshotToolResults:
    def screenshot_run(self, payload: str) -> list[Message]:
        """A tool answers with a long log and a screenshot; the agent answered it."""
        c = ToolCall(id="c-shot", name="browser", args={"action": "screenshot"})
        log_text = "page log " + words(500, "log")
        shot = Message(
            role="tool",
            content=(
                ContentPart(type="text", text=log_text),
                image_part("anthropic", payload),
            ),
            tool_call_id="c-shot",
            name="browser",
            id="t0",
        )
        return [
            Message(role="user", content="open the login page " + words(60, "task"), id="u0"),
            Message(role="assistant", content="taking a screenshot", tool_calls=(c,), id="a0"),
            shot,
            Message(role="assistant", content="the login page is shown " + words(60), id="a1"),
            Message(role="user", content="now log in", id="u1"),
        ]

    @MODES
    def test_the_log_and_the_screenshot_of_an_answered_tool_result_both_go_to_files(
        self, mode: str
    ) -> None:
        """The tool result's text is offloaded with its preview (the large tool
        results rule), its screenshot to ``outputs/media/``: two files, two markers."""
        payload = b64(png(640, 480, "shot"))
        state = self.screenshot_run(payload)
        backend = memory_backend()
        config = small_config(summary_keep_messages=10)  # no cutoff: the L1 view is sent
        out = run(mode, Compressor(config, estimator=EST, backend=backend), state)

        sent = out.view[2]
        log_text = state[2].content[0].text  # type: ignore[union-attr]
        tool_path = f"outputs/large_tool_results/browser-{text_sha256(log_text)}.txt"
        media_path, ref = reference(payload)
        body, reference_part = sent.content  # type: ignore[misc]
        assert (
            body.text.startswith(f"{OFFLOAD_HEADER}{len(log_text)} characters")
            and f"saved to {tool_path}. " in body.text
        )
        assert reference_part == ContentPart(type="text", text=ref)
        assert sent.metadata[MARK_OFFLOADED] == tool_path
        assert sent.metadata[MARK_MEDIA_OFFLOADED] == [media_path]
        assert files_in(backend) == {tool_path: log_text, media_path: payload}
        assert state[2].content[1] == image_part("anthropic", payload)  # state untouched

    @MODES
    def test_a_failed_screenshot_write_sends_the_whole_original_tool_result(
        self, mode: str
    ) -> None:
        """The log's file is written but the screenshot's is not: the original
        message (log and image) goes out; nothing leaves the view unsaved."""
        payload = b64(png(640, 480, "shot-fail"))
        state = self.screenshot_run(payload)
        backend = FailingBackend(["outputs/media"])
        config = small_config(summary_keep_messages=10)
        # the fixed rounds: lean rounds would cut a view left above T by the failed write
        compressor = Compressor(config, estimator=EST, backend=backend, lean_rounds=False)
        out = run(mode, compressor, state)
        assert out.view[2] is state[2]
        assert backend.failed == [reference(payload)[0]]
