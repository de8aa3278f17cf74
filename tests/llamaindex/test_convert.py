"""Lossless conversion between LlamaIndex ChatMessage and the core Message."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import (
    CacheControl,
    CachePoint,
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.llms.llm import ToolSelection

from ars_core import ContentPart, Message, message_from_dict, message_to_dict
from ars_core.estimate import ApproxEstimator
from ars_core.l1 import plan_l1
from ars_llamaindex import from_core, from_core_messages, to_core, to_core_messages, tool_schemas
from tests.llamaindex.helpers import Workspace, dumps

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
names = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
ids = st.one_of(st.none(), st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True))
args = st.dictionaries(names, json_values, max_size=3)

blocks = st.one_of(
    st.builds(TextBlock, text=st.text(max_size=40)),
    st.builds(
        ImageBlock, image=st.binary(min_size=1, max_size=16), image_mimetype=st.just("image/png")
    ),
    st.builds(ThinkingBlock, content=st.text(max_size=20)),
    st.builds(
        ToolCallBlock,
        tool_call_id=ids,
        tool_name=names,
        tool_kwargs=st.one_of(args, args.map(json.dumps), st.just("not json {")),
    ),
    st.builds(CachePoint, cache_control=st.just(CacheControl(type="ephemeral"))),
)
openai_calls = st.builds(
    lambda i, n, a: {
        "id": i,
        "type": "function",
        "function": {"name": n, "arguments": json.dumps(a)},
    },
    st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True),
    names,
    args,
)
selection_calls = st.builds(
    lambda i, n, a: ToolSelection(tool_id=i, tool_name=n, tool_kwargs=a),
    st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True),
    names,
    args,
)
kwargs = st.fixed_dictionaries(
    {},
    optional={
        "tool_call_id": st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True),
        "name": names,
        "id": st.text(min_size=1, max_size=8),
        "tool_calls": st.lists(st.one_of(openai_calls, selection_calls), max_size=3),
        "custom": json_values,
    },
)
messages = st.builds(
    lambda r, b, k: ChatMessage(role=r, blocks=b, additional_kwargs=k),
    st.sampled_from(list(MessageRole)),
    st.lists(blocks, max_size=4),
    kwargs,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(messages, max_size=6))
def test_conversion_is_lossless(chats: list[ChatMessage]) -> None:
    """Any ChatMessage survives to_core -> from_core (JSON-equal), and through
    the core's own JSON (what history archives and event records hold)."""
    core = to_core_messages(chats)
    assert dumps(from_core_messages(core)) == dumps(chats)
    revived = [
        message_from_dict(json.loads(json.dumps(message_to_dict(m), default=str))) for m in core
    ]
    assert dumps(from_core_messages(revived)) == dumps(chats)
    originals = {id(c): m for c, m in zip(core, chats, strict=True)}
    back = from_core_messages(core, originals)
    assert back == chats and all(a is not b for a, b in zip(back, chats, strict=True))


def test_roles_tool_calls_and_tool_names() -> None:
    """Roles map onto the core's four; tool calls come from ToolCallBlocks and
    from every additional_kwargs style; a tool result is named after its call."""
    chats = [
        ChatMessage(role="developer", content="rules"),
        ChatMessage(
            role="chatbot",
            blocks=[
                TextBlock(text="on it"),
                ToolCallBlock(tool_call_id="a", tool_name="bash", tool_kwargs='{"cmd": "ls"}'),
            ],
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "b",
                        "type": "function",
                        "function": {"name": "grep", "arguments": '{"q": "x"}'},
                    },
                    ToolSelection(tool_id="c", tool_name="cat", tool_kwargs={"path": "f"}),
                    {"id": "d", "name": "find", "input": {"dir": "."}},
                ]
            },
        ),
        ChatMessage(role="tool", content="file-a", additional_kwargs={"tool_call_id": "a"}),
        ChatMessage(
            role="function", content="hit", additional_kwargs={"tool_call_id": "b", "name": "grep"}
        ),
        ChatMessage(
            role="tool", content="x", additional_kwargs={"tool_call_id": "c", "id": "msg-9"}
        ),
    ]
    core = to_core_messages(chats)
    assert [m.role for m in core] == ["system", "assistant", "tool", "tool", "tool"]
    assert [(c.id, c.name, dict(c.args)) for c in core[1].tool_calls] == [
        ("a", "bash", {"cmd": "ls"}),
        ("b", "grep", {"q": "x"}),
        ("c", "cat", {"path": "f"}),
        ("d", "find", {"dir": "."}),
    ]
    assert core[1].content == "on it"
    assert [(m.name, m.tool_call_id) for m in core[2:]] == [
        ("bash", "a"),
        ("grep", "b"),
        ("cat", "c"),
    ]
    assert core[4].id == "msg-9"
    assert dumps(from_core_messages(core)) == dumps(chats)


@pytest.mark.spec("R11")
def test_truncated_arguments_go_back_where_they_came_from() -> None:
    """Argument truncation on LlamaIndex messages: a truncated write_file argument lands in the
    ToolCallBlock or in the OpenAI ``arguments`` string it came from; others stay."""
    big = "z" * 2500
    chats = [
        ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(
                    tool_call_id="a",
                    tool_name="write_file",
                    tool_kwargs={"path": "p", "content": big},
                )
            ],
        ),
        ChatMessage(role="tool", content="ok", additional_kwargs={"tool_call_id": "a"}),
        ChatMessage(
            role="assistant",
            content=None,
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "b",
                        "type": "function",
                        "function": {
                            "name": "write_file",
                            "arguments": json.dumps({"path": "q", "content": big}),
                        },
                    },
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd":  "ls"}'},
                    },
                ]
            },
        ),
    ]
    plan = plan_l1(to_core_messages(chats), estimator=ApproxEstimator(), tool_token_limit=300)
    view, _ = plan.finalize()
    out = from_core_messages(view)
    block = out[0].blocks[0]
    assert isinstance(block, ToolCallBlock) and block.tool_kwargs["path"] == "p"
    assert block.tool_kwargs["content"].startswith(
        "[ARS: 2500 characters of the write_file argument 'content'"
    )
    calls = out[2].additional_kwargs["tool_calls"]
    assert json.loads(calls[0]["function"]["arguments"])["content"].startswith(
        "[ARS: 2500 characters"
    )
    assert calls[1]["function"]["arguments"] == '{"cmd":  "ls"}'  # untouched, byte for byte
    assert dumps(out[1:2]) == dumps(chats[1:2])


@pytest.mark.spec("R12")
def test_offloaded_tool_result_keeps_pairing_and_non_text_blocks() -> None:
    """An offloaded multimodal tool result keeps its tool_call_id and its
    image; the text becomes ARS's body; nothing ARS-internal leaks into
    ``additional_kwargs``."""
    image = ImageBlock(image=b"\x89PNG", image_mimetype="image/png")
    chat = ChatMessage(
        role="tool",
        blocks=[TextBlock(text="log " * 3000), image],
        additional_kwargs={"tool_call_id": "a"},
    )
    core = to_core(chat, tool_name="bash")
    new = core.with_content(
        (ContentPart(type="text", text="[ARS: offloaded]"), core.content[1]),
        ars_offloaded="outputs/x.txt",
    )
    out = from_core(new)
    assert out.additional_kwargs == {"tool_call_id": "a"}
    assert [b.block_type for b in out.blocks] == ["text", "image"]
    assert out.blocks[0].text == "[ARS: offloaded]" and out.blocks[1] == image


def test_summary_message_becomes_a_plain_user_message() -> None:
    summary = Message(
        role="user",
        content="Summary ...",
        id="ars-summary-4",
        metadata={"ars_summary": True, "ars_cutoff": 4},
    )
    out = from_core(summary)
    assert (
        out.role == MessageRole.USER
        and out.content == "Summary ..."
        and out.additional_kwargs == {}
    )


@pytest.mark.spec("R3")
def test_tool_schemas_are_what_the_model_sees() -> None:
    """LlamaIndex tools are counted as their OpenAI function schemas."""
    tools = Workspace().tools()
    schemas = tool_schemas(tools)
    assert schemas is not None
    assert [s["function"]["name"] for s in schemas] == ["bash", "write_file"]
    assert schemas[1]["function"]["parameters"]["required"] == ["path", "content"]
    assert tool_schemas([{"raw": 1}, "text"]) == [{"raw": 1}, "text"]
    assert tool_schemas(None) is None and tool_schemas([]) is None


def test_changed_content_of_a_multi_block_message_replaces_its_text(*_: Any) -> None:
    chat = ChatMessage(role="user", blocks=[TextBlock(text="a"), TextBlock(text="b")])
    core = to_core(chat)
    out = from_core(attrs.evolve(core, content="trimmed"))
    assert [b.text for b in out.blocks] == ["trimmed"]  # type: ignore[union-attr]
