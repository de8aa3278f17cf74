"""The built-in summary prompt is English and asks for the conversation's own
language; the Chinese one stays available by name (``summary_prompt="zh"``)
and as a constant."""

from __future__ import annotations

import pytest

from ars_core import (
    CHINESE_SUMMARY_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    Compressor,
    ConfigError,
    FsspecBackend,
    Message,
    SummaryConfig,
)
from ars_core.config import SUMMARY_PROMPTS
from ars_core.prompt import HISTORY_FORMAT_NOTE, render_history
from ars_core.testing import FakeSummarizer

from .helpers import assistant, user, words

#: the English default, word for word: a change to the prompt is a change to this test
ENGLISH = """You compress the context of a long conversation. Below is the earlier part of a conversation between an agent and its user (tool calls and tool results included).
Write a concise but complete summary that replaces this history while the agent goes on. The user's requests that set the work and the newest request are kept verbatim beside your summary: do not restate them. The summary must keep:

1. every requirement and constraint the user stated later in the conversation;
2. the steps already done, the decisions made and why;
3. the files, paths, commands, identifiers and key values involved (verbatim);
4. the errors met and how they were handled;
5. the work still open and the next steps;
6. the facts either side stated that may be asked about later: names, dates and times, numbers, places, preferences, commitments and changes of plan.

Do not invent anything the history does not say. Write the summary in the language of the conversation.

<messages>
"""


def _one_round(config: SummaryConfig) -> tuple[str, list[Message]]:
    """Run one L2 round on a chat larger than T with a scripted summary model;
    the rendered prompt it received and the messages it summarized."""
    prompts: list[str] = []

    def answer(rendered: str) -> str:
        prompts.append(rendered)
        return "the summary"

    fake = FakeSummarizer(answer)
    engine = Compressor(config, backend=FsspecBackend("memory://prompt"), summarizer=fake)
    history = []
    for i in range(8):
        history += [user(f"question {i}: " + words(60, f"q{i}")), assistant(words(60, f"a{i}"))]
    history.append(user("and now?"))
    out = engine.call(history, lambda view: assistant("fine"))
    assert out.update is not None and out.update.event is not None
    assert len(prompts) == 1 and len(fake.calls) == 1
    return prompts[0], fake.calls[0][0]


SMALL = {"summary_threshold": 1, "summary_keep_messages": 2, "summary_l2_trigger_ratio": 0.5}


@pytest.mark.spec("R23")
def test_the_default_prompt_sent_to_the_summary_model_is_english() -> None:
    rendered, summarized = _one_round(SummaryConfig(**SMALL))
    assert DEFAULT_SUMMARY_PROMPT == ENGLISH + "{messages}\n</messages>"
    history = render_history(summarized) + "\n\n" + HISTORY_FORMAT_NOTE
    assert rendered == ENGLISH + history + "\n</messages>"
    assert "question 0" in rendered  # the history is in it, at {messages}


@pytest.mark.spec("R23")
def test_summary_prompt_zh_selects_the_chinese_prompt() -> None:
    assert SummaryConfig(summary_prompt="zh").summary_prompt == CHINESE_SUMMARY_PROMPT
    assert SummaryConfig(summary_prompt="en").summary_prompt == DEFAULT_SUMMARY_PROMPT
    assert SummaryConfig.from_context({"summary_prompt": "zh"}).summary_prompt == (
        CHINESE_SUMMARY_PROMPT
    )
    assert SUMMARY_PROMPTS == {"en": DEFAULT_SUMMARY_PROMPT, "zh": CHINESE_SUMMARY_PROMPT}
    assert CHINESE_SUMMARY_PROMPT.startswith("你是一个负责压缩长对话上下文的助手。")
    assert "使用与对话相同的语言。" in CHINESE_SUMMARY_PROMPT
    rendered, summarized = _one_round(SummaryConfig(**SMALL, summary_prompt="zh"))
    head, tail = CHINESE_SUMMARY_PROMPT.split("{messages}")
    assert rendered == head + render_history(summarized) + "\n\n" + HISTORY_FORMAT_NOTE + tail


@pytest.mark.spec("R23")
def test_an_unknown_prompt_name_is_a_config_error_naming_the_names() -> None:
    with pytest.raises(ConfigError, match="summary_prompt") as info:
        SummaryConfig(summary_prompt="fr")
    assert "'en', 'zh'" in str(info.value)
