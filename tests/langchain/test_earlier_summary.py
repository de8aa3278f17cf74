"""A LangChain ``SummarizationMiddleware`` summary already in a thread's history is
merged into ARS's next summary (R60), read the way the adapter reads messages."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from ars_core import Message
from ars_core.summarize import ExtractiveSummarizer
from ars_langchain.convert import to_core

PROMPT = "{messages}"


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str) -> Message:
    return Message(role="assistant", content=text)


@pytest.mark.spec("R60")
def test_a_langchain_summary_is_merged_into_the_next_one() -> None:
    """A LangChain ``SummarizationMiddleware`` summary (``lc_source``), as the adapter
    reads it: its opening line goes, its prose and its sections stay."""
    summary = HumanMessage(
        content="Here is a summary of the conversation to date:\n\n"
        "The user runs a bakery in Porto and wants a weekly order report.\n\n"
        "## Decisions\n- reports go out every Monday at 8:00\n- totals in euros",
        additional_kwargs={"lc_source": "summarization"},
    )
    history = [to_core(summary), user("Add the croissant sales too."), assistant("Added them.")]
    text = ExtractiveSummarizer().summarize(history, PROMPT).text
    assert text == (
        "⟦ARS⟧ Task\n"
        "Add the croissant sales too.\n\n"
        "⟦ARS⟧ Earlier summary\n"
        "The user runs a bakery in Porto and wants a weekly order report.\n\n"
        "⟦ARS⟧ Decisions\n"
        "- reports go out every Monday at 8:00\n"
        "- totals in euros\n\n"
        "⟦ARS⟧ Latest conclusions\n"
        "- Added them.\n\n"
        "⟦ARS⟧ end of summary"
    )
