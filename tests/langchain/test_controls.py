"""The controls users of the peers expect, on a real LangGraph agent
(``create_agent`` with real checkpointers): oversized user messages offloaded
in the view."""

from __future__ import annotations

import hashlib

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ars_core import FsspecBackend, SummaryConfig
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.helpers import SYSTEM, Runner, build_agent, prose
from tests.langchain.test_scenarios import cfg, kind, runner

__all__ = ["kind", "runner"]  # fixtures: every checkpointer, sync and async


@pytest.mark.spec("R10", "R12", "R5")
def test_oversized_user_message_reaches_the_model_as_a_file_and_preview(
    runner: Runner, thread_id: str
) -> None:
    """A user message larger than T: the model gets the path and a head-and-tail
    preview, the file holds the exact text (named by its SHA-256), and the
    checkpoint keeps the original message."""
    text = prose("paste", 1500) + " LAST LINE: the error is here"
    model = FakeToolChatModel([AIMessage("read it", id="a1")])
    backend = FsspecBackend(f"memory://controls-{thread_id}")
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_threshold=1), backend=backend)
    seed = [HumanMessage(text, id="h1")]
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))
    assert result.runs[0].error is None

    digest = hashlib.sha256(text.encode()).hexdigest()
    path = f"outputs/large_user_messages/user-{digest}.txt"
    system, sent = model.main_calls[0]
    assert system == SystemMessage(SYSTEM)
    assert isinstance(sent, HumanMessage) and sent.id == "h1"
    assert sent.text.startswith(
        f"[ARS: user message offloaded: {len(text)} characters (~"
    ) and sent.text.split("\nPreview:\n")[0].endswith(
        f"tokens) saved to {path}. Read that file for the full message.]"
    )
    preview = sent.text.split("\nPreview:\n", 1)[1]
    assert text.startswith(preview.split("\n[... ")[0][:200])
    assert preview.endswith("LAST LINE: the error is here")
    assert len(sent.text) < len(text) // 5
    assert backend.scoped(thread_id).read_text(path) == text
    assert result.state["messages"][0] == HumanMessage(text, id="h1")
    assert "_summarization_event" not in result.state
    assert [(e["phase"], e["level"], e.get("offloaded")) for e in result.runs[0].compression] == [
        ("started", "L1", None),
        ("completed", "L1", [path]),
    ]
