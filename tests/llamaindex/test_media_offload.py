"""Inline images of a LlamaIndex chat (``ImageBlock`` with bytes) through
``ArsMemory``, sync and async: above T, ``get()`` gives the agent the answered
images as text references to ``outputs/media/`` files holding their base64
text; the unanswered one and the chat store keep the image (R10, R12, R5)."""

from __future__ import annotations

import base64
import uuid

import anyio
import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock

from ars_core import ApproxEstimator, FsspecBackend
from ars_core.paths import text_sha256
from ars_llamaindex import ArsMemory
from tests.core.helpers import png
from tests.llamaindex.helpers import dumps


def asking(question: str, image: bytes) -> ChatMessage:
    return ChatMessage(
        role="user",
        blocks=[TextBlock(text=question), ImageBlock(image=image, image_mimetype="image/png")],
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.spec("R10", "R12", "R5")
def test_answered_image_blocks_reach_the_agent_as_file_references(mode: str) -> None:
    images = [png(640, 480, f"li-{i}") for i in range(3)]
    history = [
        asking("look at this chart", images[0]),
        ChatMessage(role="assistant", content="a bar chart of weekly sales"),
        asking("and this table?", images[1]),
        ChatMessage(role="assistant", content="the same sales by region"),
        asking("compare them", images[2]),
    ]
    backend = FsspecBackend(f"memory://li-media-{uuid.uuid4().hex}")
    memory = ArsMemory.from_defaults(
        chat_store_key="media",
        summary_threshold=1,
        summary_l2_trigger_ratio=1.0,
        file_backend=backend,
        estimator=ApproxEstimator(),
    )
    # the fixed rounds: the L1 view (above T, fewer than keep messages) is sent as it is
    memory.compressor.lean_rounds = False
    memory.set(history)
    view = memory.get() if mode == "sync" else anyio.run(memory.aget)

    payloads = [base64.b64encode(i).decode() for i in images[:2]]
    paths = [f"outputs/media/image-{text_sha256(p)}.png.b64" for p in payloads]
    refs = [
        f"[ARS: inline image, image/png data ({len(p):,} base64 characters) offloaded to "
        f"{path}; the original is kept in the conversation state]"
        for p, path in zip(payloads, paths, strict=True)
    ]
    assert [[(type(b).__name__, getattr(b, "text", None)) for b in m.blocks] for m in view] == [
        [("TextBlock", "look at this chart"), ("TextBlock", refs[0])],
        [("TextBlock", "a bar chart of weekly sales")],
        [("TextBlock", "and this table?"), ("TextBlock", refs[1])],
        [("TextBlock", "the same sales by region")],
        [("TextBlock", "compare them"), ("ImageBlock", None)],
    ]
    assert dumps([view[4]]) == dumps([history[4]])  # not answered yet: the image goes out
    files = memory.files
    assert [files.read_text(p) for p in paths] == payloads
    assert [base64.b64decode(files.read_text(p)) for p in paths] == images[:2]
    assert dumps(memory.get_all()) == dumps(history)  # the chat store keeps every image
