"""LangChain messages <-> ARS core messages, lossless.

A LangChain message becomes a core :class:`~ars_core.Message` with the same
role, content, id, name, tool calls and tool-call id. Everything else
LangChain-specific (the message type, ``additional_kwargs``,
``response_metadata``, ``usage_metadata``, ``invalid_tool_calls``, a
ToolMessage's ``artifact``/``status``, a ChatMessage's role...) is kept in the
core message's ``metadata["lc"]``, so the way back rebuilds the very same
message. ARS's own markers (``ars_offloaded``, ``ars_summary``, ...) travel in
``response_metadata["ars"]`` on the LangChain side: that field is never sent
to a provider.

Content blocks: a string block becomes a text part marked ``lc_str``; a
``{"type": "text", "text": ...}`` block a text part carrying its other keys;
any other block (images, audio, files, reasoning...) a part holding the whole
block in ``data``.

The incremental conversion of a growing history is :mod:`ars_langchain.history`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from pydantic_core import PydanticUndefined

from ars_core import (
    MARK_SUMMARY,
    MARK_TRIMMED,
    MARK_TRUNCATED_ARGS,
    ContentPart,
    Message,
    ToolCall,
)

__all__ = ["LC_KEY", "MARKERS_KEY", "from_core", "marker", "to_core", "tool_schemas", "with_marker"]

#: core ``metadata`` key holding the LangChain-only fields of a message
LC_KEY = "lc"
#: ``response_metadata`` key holding ARS markers on the LangChain side
MARKERS_KEY = "ars"


def marker(message: Any, key: str) -> Any:
    """The ARS marker ``key`` a LangChain message carries in its ``response_metadata``
    (``None`` when it carries none)."""
    markers = (getattr(message, "response_metadata", None) or {}).get(MARKERS_KEY)
    return markers.get(key) if isinstance(markers, Mapping) else None


def with_marker(message: AIMessage, key: str, value: Any) -> AIMessage:
    """A copy of the answer ``message`` carrying the ARS marker ``key`` (the model's
    object is not changed; its other markers are kept)."""
    meta = dict(message.response_metadata or {})
    markers = meta.get(MARKERS_KEY)
    markers = dict(markers) if isinstance(markers, Mapping) else {}
    markers[key] = value
    meta[MARKERS_KEY] = markers
    return message.model_copy(update={"response_metadata": meta})


#: the one role mapping: core role -> (LangChain class, the message types and
#: ChatMessage roles that mean it)
_ROLES: dict[str, tuple[type[BaseMessage], tuple[str, ...]]] = {
    "user": (HumanMessage, ("human", "user")),
    "assistant": (AIMessage, ("ai", "assistant")),
    "system": (SystemMessage, ("system", "developer")),
    "tool": (ToolMessage, ("tool", "function")),
}
_CORE_ROLE = {name: role for role, (_, names) in _ROLES.items() for name in names}
_CLASS_OF_ROLE = {role: cls for role, (cls, _) in _ROLES.items()}
_CLASS_OF_TYPE: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
    "function": FunctionMessage,
    "chat": ChatMessage,
    "HumanMessageChunk": HumanMessageChunk,
    "AIMessageChunk": AIMessageChunk,
    "SystemMessageChunk": SystemMessageChunk,
    "ToolMessageChunk": ToolMessageChunk,
    "FunctionMessageChunk": FunctionMessageChunk,
    "ChatMessageChunk": ChatMessageChunk,
}
# fields carried by the core Message itself (not duplicated in metadata["lc"])
_CORE_FIELDS = frozenset({"content", "id", "name", "tool_calls", "tool_call_id", "type"})
# raw provider copies of the tool calls: dropped when the tool calls changed (by L1 or
# the overflow tail trim)
_RAW_CALL_KEYS = ("tool_calls", "function_call")
# the markers of the copies whose tool calls L1 or the overflow tail trim rewrote
_REWRITE_MARKS = (MARK_TRUNCATED_ARGS, MARK_TRIMMED)


# ------------------------------------------------------------------ content


def _part_to_core(block: Any) -> ContentPart:
    if isinstance(block, str):
        return ContentPart(type="text", text=block, data={"lc_str": True})
    if isinstance(block, Mapping):
        kind = str(block.get("type", "unknown"))
        text = block.get("text")
        if kind == "text" and isinstance(text, str):
            return ContentPart(
                type="text",
                text=text,
                data={k: v for k, v in block.items() if k not in ("type", "text")},
            )
        return ContentPart(type=kind, data=dict(block))
    return ContentPart(type="unknown", data={"lc_value": block})


def _part_from_core(part: ContentPart) -> Any:
    data = dict(part.data)
    if part.text is not None:
        if data.pop("lc_str", False) and not data:
            return part.text
        return {"type": part.type, "text": part.text, **data}
    if "lc_value" in data and len(data) == 1:
        return data["lc_value"]
    return data if data else {"type": part.type}


def _content_to_core(content: Any) -> str | tuple[ContentPart, ...]:
    if isinstance(content, str):
        return content
    return tuple(_part_to_core(b) for b in content)


def _content_from_core(content: str | tuple[ContentPart, ...]) -> str | list[Any]:
    if isinstance(content, str):
        return content
    return [_part_from_core(p) for p in content]


# ------------------------------------------------------------------ messages


def _type_facts(kind: str) -> tuple[str, bool]:
    """The core role of a (non-chat) message type (``"AIMessageChunk"`` ->
    ``"assistant"``), and whether the type is kept (not the plain class of its role)."""
    base = kind.removesuffix("MessageChunk").lower() if kind.endswith("MessageChunk") else kind
    role = _CORE_ROLE.get(base, "user")
    facts = _TYPE_FACTS[kind] = (role, _CLASS_OF_TYPE.get(kind) is not _CLASS_OF_ROLE.get(role))
    return facts


#: the facts of each LangChain message type seen
_TYPE_FACTS: dict[str, tuple[str, bool]] = {}


class _LcFields(dict[str, Any]):
    """``metadata["lc"]`` of a converted message: its LangChain-only fields.

    ``calls`` holds the core tool calls the message was converted with when its
    LangChain tool calls were the standard ones (:func:`_standard_call`): those are
    rebuilt from the core calls instead of kept as a second copy of every argument in
    each archive line, and an L1 rewrite is told from them. It rides along with every
    copy L1 makes (copies share this object) and is never serialised. Unset (read
    with ``getattr(fields, "calls", None)``) otherwise: a slot, no ``__dict__`` made
    for every converted message that has calls.
    """

    __slots__ = ("calls",)
    calls: tuple[ToolCall, ...] | None


_STANDARD_CALL_KEYS = frozenset({"name", "args", "id", "type"})


def _standard_call(call: Mapping[str, Any]) -> bool:
    """Whether a LangChain tool call is exactly what :func:`_rebuilt_call` makes of
    its core twin (LangChain's own ``tool_call`` form with an id)."""
    return (
        call.keys() == _STANDARD_CALL_KEYS
        and call["type"] == "tool_call"
        and isinstance(call["id"], str)
        and call["id"] != ""
        and type(call["args"]) is dict
    )


def _rebuilt_call(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "args": dict(call.args), "id": call.id or None, "type": "tool_call"}


#: per message class: (field, its plain default other than None, else _NO_DEFAULT) for
#: every LangChain-only field
_NO_DEFAULT = object()
_LC_FIELDS: dict[type[BaseMessage], tuple[tuple[str, Any], ...]] = {}


def _lc_fields(cls: type[BaseMessage]) -> tuple[tuple[str, Any], ...]:
    fields = _LC_FIELDS.get(cls)
    if fields is None:
        fields = tuple(
            (name, _NO_DEFAULT if info.default in (PydanticUndefined, None) else info.default)
            for name, info in cls.model_fields.items()
            if name not in _CORE_FIELDS
        )
        _LC_FIELDS[cls] = fields
    return fields


class _Kind:
    """What :func:`to_core` needs to know of a LangChain message class, worked out
    once per class (pydantic's ``isinstance`` is slow, and a class's fields are fixed)."""

    __slots__ = ("chat", "defaulted", "falsy", "fields", "function", "has_call_id", "has_calls")

    def __init__(self, cls: type[BaseMessage]) -> None:
        names = _field_names(cls)
        self.chat = issubclass(cls, ChatMessage)
        self.function = issubclass(cls, FunctionMessage)
        self.has_calls = "tool_calls" in names
        self.has_call_id = "tool_call_id" in names
        self.fields = _lc_fields(cls)
        #: the fields nothing is kept of while they are falsy, and those with a default
        #: (a message whose fields are all so has no LangChain-only field to keep)
        self.falsy = tuple(f for f, d in self.fields if d is _NO_DEFAULT or not d)
        self.defaulted = tuple((f, d) for f, d in self.fields if d is not _NO_DEFAULT and d)
        if self.chat:  # a ChatMessage's role is always kept
            self.falsy, self.defaulted = (), (("", _NO_DEFAULT),)


_KINDS: dict[type[BaseMessage], _Kind] = {}


def _keep_fields(values: Mapping[str, Any], kind: _Kind, extra: _LcFields) -> Any:
    """Keep in ``extra`` the LangChain-only fields that are set and differ from their
    default (``response_metadata`` without ARS's markers); the markers, if any."""
    markers: Any = None
    for field, default in kind.fields:
        value = values.get(field)
        if not value and field != "role":
            continue
        if field == "response_metadata" and isinstance(value, dict | Mapping):
            if MARKERS_KEY in value:
                markers = value[MARKERS_KEY]
                value = {k: v for k, v in value.items() if k != MARKERS_KEY}
                if not value:
                    continue
        if default is _NO_DEFAULT or value != default:
            extra[field] = value
    return markers


def to_core(message: BaseMessage) -> Message:
    """One LangChain message as a core message (see the module docstring).

    Only what :func:`from_core` cannot tell from the core message is kept in
    ``metadata["lc"]``: the message type unless it is the plain class of the role,
    fields that are set and differ from their default, and the tool calls unless
    they are LangChain's standard ones (the archive then holds each argument once).
    """
    cls = type(message)
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = _Kind(cls)
    values = message.__dict__  # pydantic keeps the fields there (read at dict speed)
    lc_type = values.get("type") or message.type
    if kind.chat:
        role = _CORE_ROLE.get(str(values.get("role")), "user")
        keeps_type = _CLASS_OF_TYPE.get(lc_type) is not _CLASS_OF_ROLE.get(role)
    else:
        role, keeps_type = _TYPE_FACTS.get(lc_type) or _type_facts(lc_type)
    extra = _LcFields()
    if keeps_type:
        extra["type"] = lc_type
    markers = None
    if any(map(values.get, kind.falsy)) or any(
        [values.get(f) != d for f, d in kind.defaulted]
    ):  # a LangChain-only field set (most messages have none)
        markers = _keep_fields(values, kind, extra)
    calls = values.get("tool_calls") if kind.has_calls else None
    core_calls: tuple[ToolCall, ...] = ()
    if calls:
        core_calls = tuple(
            [
                ToolCall.of_fields(c.get("id") or "", c["name"], dict(c.get("args") or {}))
                for c in calls
            ]
        )
        if all([_standard_call(c) for c in calls]):
            extra.calls = core_calls  # rebuilt by from_core while L1 leaves them alone
        else:  # the originals, to give back unchanged when L1 left them alone
            extra["tool_calls"] = list(calls)
    metadata: dict[str, Any] = (
        dict(markers) if markers is not None and isinstance(markers, dict | Mapping) else {}
    )
    if extra or core_calls:
        metadata[LC_KEY] = extra
    tool_call_id = values.get("tool_call_id") if kind.has_call_id else None
    name = values.get("name")
    if kind.function:  # legacy function results answer by name
        tool_call_id = tool_call_id or name
    content = values.get("content", "")
    return Message.of_fields(
        role,
        content if isinstance(content, str) else _content_to_core(content),
        values.get("id"),
        name,
        core_calls,
        tool_call_id,
        metadata,
    )


def _same_calls(core: Sequence[ToolCall], original: Sequence[Mapping[str, Any]]) -> bool:
    if len(core) != len(original):
        return False
    return all(
        c.id == (o.get("id") or "")
        and c.name == o["name"]
        and dict(c.args) == dict(o.get("args") or {})
        for c, o in zip(core, original, strict=False)
    )


def from_core(message: Message) -> BaseMessage:
    """A core message as a LangChain message; the inverse of :func:`to_core`.

    A message without LangChain fields (an ARS summary) becomes the plain
    class of its role (``user`` -> ``HumanMessage``). ARS markers go to
    ``response_metadata["ars"]``. An ARS summary is marked as harness-inserted
    the way LangChain marks its own summaries (``add_notification_metadata``:
    ``additional_kwargs["lc_source"] = "summarization"``, an earlier ``lc_data``
    removed), so UIs, evals and deepagents do not take it for something the
    user typed.
    """
    fields = message.metadata.get(LC_KEY) or {}
    markers = {k: v for k, v in message.metadata.items() if k != LC_KEY}
    kind = fields.get("type")
    cls = _CLASS_OF_TYPE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        cls = _CLASS_OF_ROLE.get(message.role, HumanMessage)
    names = _field_names(cls)
    kwargs: dict[str, Any] = {
        k: v for k, v in fields.items() if k in names and k not in _REBUILT_FIELDS
    }
    response_metadata = dict(kwargs.get("response_metadata") or {})
    if markers:
        response_metadata[MARKERS_KEY] = markers
    kwargs["response_metadata"] = response_metadata
    kwargs["content"] = _content_from_core(message.content)
    if message.id is not None:
        kwargs["id"] = message.id
    if message.name is not None:
        kwargs["name"] = message.name
    if "tool_calls" in names:
        original_calls = fields.get("tool_calls")
        if original_calls is None:
            # standard calls: rebuilt from the calls the message was converted with (its
            # own when read back from an archive, where nothing rewrote them)
            converted_with = getattr(fields, "calls", None)
            if converted_with is None and any(k in markers for k in _REWRITE_MARKS):
                converted_with = ()  # rewritten, originals unknown: never resend a raw copy
            base = message.tool_calls if converted_with is None else converted_with
            original_calls = [_rebuilt_call(c) for c in base]
        if _same_calls(message.tool_calls, original_calls):
            kwargs["tool_calls"] = original_calls
        else:
            kwargs["tool_calls"] = [_rebuilt_call(c) for c in message.tool_calls]
            raw = dict(kwargs.get("additional_kwargs") or {})
            for key in _RAW_CALL_KEYS:  # the provider's raw copy would resend what was trimmed
                raw.pop(key, None)
            kwargs["additional_kwargs"] = raw
    if "tool_call_id" in names:
        kwargs["tool_call_id"] = message.tool_call_id or ""
    if cls is ChatMessage or cls is ChatMessageChunk:
        kwargs.setdefault("role", message.role)
    if markers.get(MARK_SUMMARY) and issubclass(cls, HumanMessage):
        notice = {
            k: v for k, v in (kwargs.get("additional_kwargs") or {}).items() if k != "lc_data"
        }
        notice["lc_source"] = "summarization"
        kwargs["additional_kwargs"] = notice
    return cls(**kwargs)


#: LangChain fields :func:`from_core` sets itself, never from ``metadata["lc"]``
_REBUILT_FIELDS = frozenset({"type", "tool_calls"})
_FIELD_NAMES: dict[type[BaseMessage], frozenset[str]] = {}


def _field_names(cls: type[BaseMessage]) -> frozenset[str]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(cls.model_fields)
    return names


def tool_schemas(tools: Sequence[Any]) -> list[Any]:
    """Tool schemas as the model sees them (OpenAI function format), for the estimate."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    out: list[Any] = []
    for tool in tools:
        try:
            out.append(convert_to_openai_tool(tool))
        except Exception:  # a provider-specific dict or an exotic tool: count its text
            out.append(tool if isinstance(tool, Mapping) else str(tool))
    return out


#: the messages at the start of a view mapped back one by one when the rest is the
#: converted history's end (the summary and the kept messages sent in another form)
VIEW_HEAD = 32
