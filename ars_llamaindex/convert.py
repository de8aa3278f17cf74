"""Lossless conversion between LlamaIndex ``ChatMessage`` and ARS core ``Message``.

To the core (:func:`to_core`, :func:`to_core_messages`):

* roles: ``system``/``developer`` -> ``system``; ``user``; ``assistant``/``chatbot``/
  ``model`` -> ``assistant``; ``tool``/``function`` -> ``tool``;
* ``TextBlock`` -> a text part (a single text block becomes plain string content);
  any other content block (image, audio, document, thinking, citation...) -> a
  part of that ``block_type`` whose ``data`` is the block's JSON dump;
* tool calls, from ``ToolCallBlock`` blocks and from
  ``additional_kwargs["tool_calls"]`` (OpenAI ``{"id", "function": {"name",
  "arguments"}}``, LlamaIndex ``ToolSelection`` ``{"tool_id", "tool_name",
  "tool_kwargs"}`` or ``{"id", "name", "input"}``; dicts or objects);
* ``additional_kwargs["tool_call_id"]`` -> ``tool_call_id``; the tool's name comes
  from ``additional_kwargs["name"]``/``["tool_name"]`` or, in a sequence, from the
  assistant call it answers (FunctionAgent's tool messages carry only the id);
  ``additional_kwargs["id"]`` -> ``id``.

Everything needed to rebuild the exact original travels in
``metadata["llamaindex"]``: the message's JSON dump with the text of its text
blocks removed (that text is the core content, so it is not stored twice).
:func:`from_core` rebuilds from it, applying whatever ARS changed in the copy
(offloaded tool results, truncated ``write_file`` arguments, trimmed tails);
an ARS summary message (no such metadata) becomes a plain ``user`` message
(ARS's markers never go into ``additional_kwargs``: some providers send those
fields on and reject unknown ones). ``from_core(to_core(m))`` equals
``m`` field for field in JSON form; with ``originals`` (core message identity ->
original) an unchanged message comes back as a deep copy of the original
object itself.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ContentBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from pydantic import TypeAdapter

from ars_core import ContentPart, Message, ToolCall

__all__ = [
    "META_KEY",
    "from_core",
    "from_core_messages",
    "system_text",
    "to_core",
    "to_core_messages",
    "tool_schemas",
]

#: metadata key of a core message that holds the LlamaIndex skeleton
META_KEY = "llamaindex"

#: the one role mapping: core role -> the LlamaIndex roles that mean it (the
#: first is what a message ARS made gets)
_ROLES: dict[str, tuple[str, ...]] = {
    "system": ("system", "developer"),
    "user": ("user",),
    "assistant": ("assistant", "chatbot", "model"),
    "tool": ("tool", "function"),
}
_TO_CORE_ROLE = {name: role for role, names in _ROLES.items() for name in names}

_BLOCK_ADAPTER: TypeAdapter[Any] = TypeAdapter(ContentBlock)
_RAW_ARGS = "__raw_arguments__"


# ------------------------------------------------------------------ tool calls


def _get(item: Any, key: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(key)
    return getattr(item, key, None)


def _parse_args(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {_RAW_ARGS: raw}
        return dict(parsed) if isinstance(parsed, dict) else {_RAW_ARGS: raw}
    return {_RAW_ARGS: raw}


def _kwargs_call(item: Any) -> ToolCall | None:
    """One entry of ``additional_kwargs["tool_calls"]`` as a core tool call."""
    fn = _get(item, "function")
    if fn is not None and _get(fn, "name") is not None:  # OpenAI style
        return ToolCall(
            id=str(_get(item, "id") or ""),
            name=str(_get(fn, "name")),
            args=_parse_args(_get(fn, "arguments")),
        )
    if _get(item, "tool_name") is not None:  # ToolSelection style
        return ToolCall(
            id=str(_get(item, "tool_id") or ""),
            name=str(_get(item, "tool_name")),
            args=_parse_args(_get(item, "tool_kwargs")),
        )
    if _get(item, "name") is not None:  # {"id", "name", "input"/"args"}
        raw = _get(item, "input")
        if raw is None:
            raw = _get(item, "args")
        return ToolCall(
            id=str(_get(item, "id") or ""), name=str(_get(item, "name")), args=_parse_args(raw)
        )
    return None


def _write_kwargs_call(item: dict[str, Any], call: ToolCall) -> None:
    """Put (possibly changed) ``call.args`` back into a dumped ``tool_calls`` entry."""
    fn = item.get("function")
    if isinstance(fn, dict) and fn.get("name") is not None:
        if _parse_args(fn.get("arguments")) != dict(call.args):
            fn["arguments"] = _args_out(call.args, as_str=True)
    elif item.get("tool_name") is not None:
        if _parse_args(item.get("tool_kwargs")) != dict(call.args):
            item["tool_kwargs"] = _args_out(
                call.args, as_str=isinstance(item.get("tool_kwargs"), str)
            )
    elif item.get("name") is not None:
        key = "input" if "input" in item or "args" not in item else "args"
        if _parse_args(item.get(key)) != dict(call.args):
            item[key] = _args_out(call.args, as_str=isinstance(item.get(key), str))


def _args_out(args: Mapping[str, Any], *, as_str: bool) -> Any:
    if set(args) == {_RAW_ARGS}:
        return args[_RAW_ARGS]
    return json.dumps(dict(args), ensure_ascii=False) if as_str else dict(args)


def _kwargs_calls(message: ChatMessage) -> list[ToolCall]:
    raw = message.additional_kwargs.get("tool_calls")
    if not isinstance(raw, (list, tuple)):
        return []
    return [c for c in (_kwargs_call(item) for item in raw) if c is not None]


# ------------------------------------------------------------------ to the core


def _role_value(role: Any) -> str:
    return role.value if isinstance(role, MessageRole) else str(role)


def to_core(message: ChatMessage, *, tool_name: str | None = None) -> Message:
    """One LlamaIndex message as a core message (``tool_name`` names the tool
    a tool result answers when the message itself does not say)."""
    dump = message.model_dump(mode="json")
    role = _role_value(message.role)
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    for block, block_dump in zip(message.blocks, dump["blocks"], strict=True):
        if isinstance(block, TextBlock):
            parts.append(ContentPart(type="text", text=block.text))
            block_dump.pop("text", None)
        elif isinstance(block, ToolCallBlock):
            calls.append(
                ToolCall(
                    id=block.tool_call_id or "",
                    name=block.tool_name,
                    args=_parse_args(block.tool_kwargs),
                )
            )
        else:
            parts.append(
                ContentPart(type=str(block_dump.get("block_type", "unknown")), data=block_dump)
            )
    calls.extend(_kwargs_calls(message))
    content: str | tuple[ContentPart, ...]
    if not parts:
        content = ""
    elif len(parts) == 1 and parts[0].type == "text":
        content = parts[0].text or ""
    else:
        content = tuple(parts)
    kw = message.additional_kwargs
    core_role = _TO_CORE_ROLE.get(role, "user")
    name = _name(kw, tool_name if core_role == "tool" else None)
    call_id = kw.get("tool_call_id")
    msg_id = kw.get("id")
    return Message(
        role=core_role,
        content=content,
        id=msg_id if isinstance(msg_id, str) else None,
        name=name,
        tool_calls=tuple(calls),
        tool_call_id=str(call_id) if call_id is not None else None,
        metadata={META_KEY: dump},
    )


def _name(kw: Mapping[str, Any], tool_name: str | None) -> str | None:
    name = kw.get("name") or kw.get("tool_name") or tool_name
    return str(name) if name is not None else None


def answered_tool(message: ChatMessage, names: Mapping[str, str]) -> str | None:
    """The name of the tool ``message`` answers, by the id of its call (``names``:
    call id -> tool name, of the calls before it); ``None`` when unknown."""
    return names.get(str(message.additional_kwargs.get("tool_call_id")))


def core_name(message: ChatMessage, core_role: str, names: Mapping[str, str]) -> str | None:
    """The ``name`` :func:`to_core_messages` gives ``message`` after the calls in ``names``."""
    tool_name = answered_tool(message, names) if core_role == "tool" else None
    return _name(message.additional_kwargs, tool_name)


def to_core_messages(messages: Iterable[ChatMessage]) -> list[Message]:
    """A conversation as core messages; tool results get the name of the tool
    whose call they answer."""
    names: dict[str, str] = {}
    out: list[Message] = []
    for m in messages:
        core = to_core(m, tool_name=answered_tool(m, names))
        for c in core.tool_calls:
            if c.id:
                names[c.id] = c.name
        out.append(core)
    return out


def same_message(a: ChatMessage, b: ChatMessage) -> bool:
    """Whether two messages are the same message: the same object, equal, or
    equal field for field in JSON form (values of a class that compares by
    identity, copied or read back, are still the same)."""
    return a is b or a == b or a.model_dump(mode="json") == b.model_dump(mode="json")


# ------------------------------------------------------------------ back


def _content_blocks(message: Message) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"block_type": "text", "text": message.content}]
    out: list[dict[str, Any]] = []
    for p in message.content:
        if p.type == "text" or (p.text is not None and not p.data):
            out.append({"block_type": "text", "text": p.text or ""})
        elif p.data:
            out.append(dict(p.data))
        else:
            out.append({"block_type": "text", "text": f"[{p.type}]"})
    return out


def _rebuild(message: Message, skeleton: Mapping[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(dict(skeleton))
    slots = [b for b in data["blocks"] if b.get("block_type") != "tool_call"]
    n_call_blocks = len(data["blocks"]) - len(slots)
    # content: fill the original slots when the shape is unchanged, else take ARS's content
    if isinstance(message.content, str):
        if not slots and message.content == "":
            new_content: list[dict[str, Any]] = []
        elif len(slots) == 1 and slots[0].get("block_type") == "text":
            new_content = [{**slots[0], "text": message.content}]
        else:
            new_content = _content_blocks(message)
    else:
        parts = message.content
        same_shape = len(parts) == len(slots) and all(
            (p.type == "text") == (s.get("block_type") == "text")
            for p, s in zip(parts, slots, strict=True)
        )
        if same_shape:
            new_content = [
                {**s, "text": p.text or ""} if p.type == "text" else dict(p.data)
                for p, s in zip(parts, slots, strict=True)
            ]
        else:
            new_content = _content_blocks(message)
    # tool calls: the first ones are ToolCallBlocks, the rest additional_kwargs entries
    calls = list(message.tool_calls)
    block_calls, kw_calls = calls[:n_call_blocks], calls[n_call_blocks:]
    blocks: list[dict[str, Any]] = []
    contents = iter(new_content)
    calls_iter = iter(block_calls)
    keep_layout = len(new_content) == len(slots)
    for b in data["blocks"]:
        if b.get("block_type") == "tool_call":
            call = next(calls_iter, None)
            if call is None:
                continue
            raw = b.get("tool_kwargs")
            if _parse_args(raw) != dict(call.args):
                b["tool_kwargs"] = _args_out(call.args, as_str=isinstance(raw, str))
            b["tool_name"] = call.name
            blocks.append(b)
        elif keep_layout:
            blocks.append(next(contents))
        elif not any(x.get("block_type") != "tool_call" for x in blocks):
            blocks.extend(contents)  # ARS changed the shape: its content where the content was
    if not keep_layout:
        blocks.extend(contents)
    data["blocks"] = blocks
    raw_calls = data.get("additional_kwargs", {}).get("tool_calls")
    if isinstance(raw_calls, list) and kw_calls:
        it = iter(kw_calls)
        for item in raw_calls:
            if isinstance(item, dict) and _kwargs_call(item) is not None:
                call = next(it, None)
                if call is not None:
                    _write_kwargs_call(item, call)
    return data


def _fresh(message: Message) -> ChatMessage:
    """A message ARS made (the summary) or one without a LlamaIndex origin."""
    role = _ROLES[message.role][0]
    kwargs: dict[str, Any] = {}  # ARS markers stay out: providers may reject unknown fields
    if message.tool_call_id is not None:
        kwargs["tool_call_id"] = message.tool_call_id
    if message.name is not None and message.role == "tool":
        kwargs["name"] = message.name
    blocks: list[Any] = [_BLOCK_ADAPTER.validate_python(b) for b in _content_blocks(message)]
    blocks += [
        ToolCallBlock(tool_call_id=c.id or None, tool_name=c.name, tool_kwargs=dict(c.args))
        for c in message.tool_calls
    ]
    return ChatMessage(role=role, blocks=blocks, additional_kwargs=kwargs)


def from_core(message: Message, originals: Mapping[int, ChatMessage] | None = None) -> ChatMessage:
    """The LlamaIndex message for a core message (see the module docstring)."""
    if originals is not None:
        original = originals.get(id(message))
        if original is not None:
            return original.model_copy(deep=True)
    skeleton = message.metadata.get(META_KEY)
    if not isinstance(skeleton, Mapping):
        return _fresh(message)
    data = _rebuild(message, skeleton)
    return ChatMessage.model_validate(data)


def from_core_messages(
    messages: Sequence[Message], originals: Mapping[int, ChatMessage] | None = None
) -> list[ChatMessage]:
    return [from_core(m, originals) for m in messages]


# ------------------------------------------------------------------ request extras


def tool_schemas(tools: Sequence[Any] | None) -> list[Any] | None:
    """Tool schemas as the model sees them (OpenAI function JSON for LlamaIndex
    tools; mappings and strings pass through), for the request estimate."""
    if not tools:
        return None
    out: list[Any] = []
    for t in tools:
        metadata = getattr(t, "metadata", None)
        to_openai = getattr(metadata, "to_openai_tool", None)
        if to_openai is not None:
            try:
                out.append(to_openai(skip_length_check=True))
            except TypeError:
                out.append(to_openai())
        else:
            out.append(t)
    return out


def system_text(system: ChatMessage | str | None) -> str | None:
    """The system prompt as text (a ``ChatMessage``'s content, or the string)."""
    if system is None:
        return None
    if isinstance(system, ChatMessage):
        return system.content or ""
    return system
