"""R57: one conversation costs the same whatever format carries it (OpenAI
dicts, Anthropic content blocks, LangChain v1 blocks through the converter)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ars_core import ApproxEstimator, Message, TiktokenEstimator, from_openai
from ars_langchain import HistoryConverter

TASK = "The test suite fails on test_parse_dates; find out why and fix the parser."
THOUGHT = (
    "The failure mentions a timezone offset, so the parser probably drops the sign of "
    "negative offsets. I will read the parser and then run the one failing test. "
) * 6
CALLS = [
    ("toolu_01A09q90qw90lq917835lq9", "bash", {"command": "grep -n 'def parse' src/dates.py"}),
    ("toolu_01B77x12kl34mn56op78qr9", "read_file", {"path": "src/dates.py", "limit": 200}),
]
RESULTS = [
    "12:def parse(value: str) -> datetime:\n48:def parse_offset(text: str) -> timedelta:",
    "\n".join(f"{i:4d}  line {i} of the dates module: return value.strip()" for i in range(60)),
]
ANSWER = "The sign of negative offsets was dropped in parse_offset; fixed and the test passes."


def openai_form() -> list[Message]:
    msgs = [
        {"role": "user", "content": TASK},
        {
            "role": "assistant",
            "content": THOUGHT,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, n, a in CALLS
            ],
        },
        *(
            {"role": "tool", "tool_call_id": c[0], "content": r}
            for c, r in zip(CALLS, RESULTS, strict=True)
        ),
        {"role": "assistant", "content": ANSWER},
    ]
    return [from_openai(m) for m in msgs]


def anthropic_form() -> list[Message]:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": TASK}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THOUGHT, "signature": "EqQBCkYIBxgCKkA"},
                *({"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in CALLS),
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": c[0], "content": r}
                for c, r in zip(CALLS, RESULTS, strict=True)
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
    ]
    return [from_openai(m) for m in msgs]


def langchain_v1_form() -> list[Any]:
    calls = [{"type": "tool_call", "id": i, "name": n, "args": a} for i, n, a in CALLS]
    return [
        HumanMessage(TASK),
        AIMessage(
            content=[{"type": "reasoning", "reasoning": THOUGHT}, *calls],
            tool_calls=calls,
            output_version="v1",
        ),
        *(ToolMessage(r, tool_call_id=c[0]) for c, r in zip(CALLS, RESULTS, strict=True)),
        AIMessage(content=[{"type": "text", "text": ANSWER}], output_version="v1"),
    ]


def langchain_anthropic_form() -> list[Any]:
    """What langchain-anthropic stores: tool_use blocks AND the same calls in tool_calls."""
    blocks = [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in CALLS]
    return [
        HumanMessage(TASK),
        AIMessage(
            content=[{"type": "thinking", "thinking": THOUGHT, "signature": "EqQ"}, *blocks],
            tool_calls=[{"type": "tool_call", "id": i, "name": n, "args": a} for i, n, a in CALLS],
        ),
        *(ToolMessage(r, tool_call_id=c[0]) for c, r in zip(CALLS, RESULTS, strict=True)),
        AIMessage(ANSWER),
    ]


@pytest.mark.spec("R57", "R3")
@pytest.mark.parametrize(
    "make", [ApproxEstimator, lambda: TiktokenEstimator("o200k_base")], ids=["approx", "o200k"]
)
def test_one_conversation_in_four_formats_gets_estimates_within_5_percent(make: Any) -> None:
    """OpenAI dicts, Anthropic blocks, LangChain v1 blocks and langchain-anthropic's
    blocks-plus-tool_calls: each call counted once, thinking by its text."""
    est = make()
    openai = est.count(openai_form())
    thought = est.count_text(THOUGHT)  # the OpenAI form has the thought as plain text
    counts = {
        "anthropic": est.count(anthropic_form()),
        "langchain v1": est.count(HistoryConverter().convert(langchain_v1_form())),
        "langchain-anthropic": est.count(HistoryConverter().convert(langchain_anthropic_form())),
    }
    assert openai > 2 * thought
    for name, count in counts.items():
        assert abs(count - openai) <= 0.05 * openai, (name, count, openai)
