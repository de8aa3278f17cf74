"""Inline base64 images through a real LangGraph graph (``create_agent`` + a
real checkpointer, sync and async): above T, the images the model already
answered go to ``outputs/media/`` and the model gets a reference in their
place; the unanswered one, and the checkpoint, keep the image (R10, R12, R5)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ars_core import ApproxEstimator, FsspecBackend, SummaryConfig
from ars_core.paths import text_sha256
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.core.helpers import png
from tests.langchain.helpers import SYSTEM, Runner, build_agent


@pytest.fixture(params=["sync", "async"])
def runner(request: pytest.FixtureRequest, tmp_path: Path) -> Runner:
    return Runner("sqlite", request.param, tmp_path, request)


def asking(question: str, payload: str, id: str) -> HumanMessage:
    url = f"data:image/png;base64,{payload}"
    return HumanMessage(
        [{"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": url}}],
        id=id,
    )


@pytest.mark.spec("R10", "R12", "R5")
def test_answered_inline_images_reach_the_model_as_file_references(
    runner: Runner, thread_id: str
) -> None:
    """Two answered screenshots become ``[ARS: inline image ... offloaded to
    outputs/media/image-<sha256>.png.b64 ...]`` text blocks holding their exact
    base64 text in the file; the new question's screenshot goes out whole."""
    images = [base64.b64encode(png(640, 480, f"lc-{i}")).decode() for i in range(3)]
    seed: list[Any] = [
        asking("look at this chart", images[0], "h0"),
        AIMessage("a bar chart of weekly sales", id="a0"),
        asking("and this table?", images[1], "h1"),
        AIMessage("the same sales by region", id="a1"),
        asking("compare them", images[2], "h2"),
    ]
    model = FakeToolChatModel([AIMessage("they agree", id="a2")])
    backend = FsspecBackend(f"memory://media-{thread_id}")
    config = SummaryConfig(summary_threshold=1, summary_l2_trigger_ratio=1.0)
    # read_tool=False: the scripted turns below are sized for a request without its schema
    mw = ArsSummarizationMiddleware(
        config, backend=backend, estimator=ApproxEstimator(), read_tool=False
    )
    result = runner.run(
        build_agent(model, mw), [{"messages": seed}], {"configurable": {"thread_id": thread_id}}
    )

    assert result.runs[0].error is None
    paths = [f"outputs/media/image-{text_sha256(p)}.png.b64" for p in images[:2]]
    refs = [
        f"[ARS: inline image, image/png data ({len(p):,} base64 characters) offloaded to "
        f"{path}; the original is kept in the conversation state]"
        for p, path in zip(images[:2], paths, strict=True)
    ]
    (sent,) = model.main_calls
    assert sent[0] == SystemMessage(SYSTEM)
    assert [(m.id, m.content) for m in sent[1:]] == [
        ("h0", [{"type": "text", "text": "look at this chart"}, {"type": "text", "text": refs[0]}]),
        ("a0", "a bar chart of weekly sales"),
        ("h1", [{"type": "text", "text": "and this table?"}, {"type": "text", "text": refs[1]}]),
        ("a1", "the same sales by region"),
        ("h2", seed[4].content),
    ]
    stored = backend.scoped(thread_id)
    assert [stored.read_text(p) for p in paths] == images[:2]
    assert result.state["messages"][:5] == seed  # the checkpoint keeps every image
    assert "_summarization_event" not in result.state
    started, completed = result.runs[0].compression
    assert (started["phase"], completed["phase"], completed["level"]) == (
        "started",
        "completed",
        "L1",
    )
    assert completed["offloaded"] == paths
