"""The message model: what ARS reads, compresses and hands back.

A :class:`Message` is frozen: ARS never mutates a caller's message, it builds
copies with :func:`attrs.evolve`. Content is either a string or a tuple of
:class:`ContentPart` (text, image, or anything else a provider sends, kept
verbatim in ``data``). ``metadata`` carries ARS's markers (see ``MARK_*``)
and anything an adapter needs for a lossless round trip.

Readers for OpenAI chat-completions JSON / JSONL (gzip too) live here as well.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, overload

import attrs

from .errors import MessageFormatError
from .typing import Role

__all__ = [
    "MARK_OFFLOADED",
    "MARK_SUMMARY",
    "MARK_TRIMMED",
    "MARK_TRUNCATED_ARGS",
    "MAX_RUN_BYTES",
    "ContentPart",
    "Message",
    "Role",
    "ToolCall",
    "as_messages",
    "from_openai",
    "message_from_dict",
    "message_to_dict",
    "read_messages",
    "to_openai",
    "tool_pairing_errors",
]

ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

#: the largest recorded run :func:`read_messages` unpacks from gzip (bytes)
MAX_RUN_BYTES = 256 * 1024 * 1024
#: metadata key: the virtual path a tool result's full text was offloaded to (L1)
MARK_OFFLOADED = "ars_offloaded"
#: metadata key: number of tool-call arguments truncated in this copy (L1)
MARK_TRUNCATED_ARGS = "ars_truncated_args"
#: metadata key: this message is an ARS summary (L2)
MARK_SUMMARY = "ars_summary"
#: metadata key: this message's content was trimmed under overflow; value is the path
MARK_TRIMMED = "ars_trimmed"


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value) if value else {}


class _NoMetadata(dict[str, Any]):
    """The one empty ``metadata`` every message without any shares (a dict of its own
    per message took 64 bytes a message): read-only, so no write through one message
    reaches another (a message's metadata is never written in place; copies merge into
    a new dict). Equal to ``{}``, shown as ``{}``; copied, deep-copied and pickled as a
    plain ``{}``, as the message's own dict was."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            "a message's empty metadata is shared and read-only: build a copy with "
            "metadata (Message.with_content, attrs.evolve)"
        )

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[()]]:
        return dict, ()


#: the metadata of every message built without any (see :class:`_NoMetadata`)
NO_METADATA: Mapping[str, Any] = _NoMetadata()


def _metadata(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value) if value else NO_METADATA


@attrs.frozen
class ToolCall:
    """A tool call requested by an assistant message."""

    id: str
    name: str
    args: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)

    @classmethod
    def of_fields(cls, id: str, name: str, args: dict[str, Any]) -> ToolCall:
        """A tool call from fields in their final form (``args`` a dict the call owns):
        built without the constructor's conversions, for adapters converting many."""
        call = _new(cls)
        _set(call, "id", id)
        _set(call, "name", name)
        _set(call, "args", args)
        return call


_new = object.__new__
_set = object.__setattr__


@attrs.frozen
class ContentPart:
    """One part of a multimodal message.

    ``type`` is ``"text"`` (with ``text``), ``"image"`` or any other provider
    type; ``data`` keeps every other field verbatim so the part survives a
    round trip.
    """

    type: str
    text: str | None = None
    data: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)


def _content(value: str | Iterable[ContentPart]) -> str | tuple[ContentPart, ...]:
    if isinstance(value, str):
        return value
    parts = tuple(value)
    for part in parts:
        if not isinstance(part, ContentPart):
            raise MessageFormatError(
                f"content part must be a ContentPart, not {type(part).__name__}"
            )
    return parts


def _calls(value: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(value)


def _role(_: Any, __: Any, value: str) -> None:
    if value not in ROLES:
        raise MessageFormatError(f"unknown role {value!r} (expected one of {sorted(ROLES)})")


@attrs.frozen
class Message:
    """One chat message.

    ``_cache`` is private per-instance scratch space for estimators and L1
    (never compared, never serialised): it is what keeps per-call work
    proportional to the new messages.
    """

    role: str = attrs.field(validator=_role)
    content: str | tuple[ContentPart, ...] = attrs.field(default="", converter=_content)
    id: str | None = None
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_calls)
    tool_call_id: str | None = None
    metadata: Mapping[str, Any] = attrs.field(default=NO_METADATA, converter=_metadata)
    _cache: dict[Any, Any] = attrs.field(
        factory=dict, init=False, eq=False, repr=False, hash=False, alias="_cache"
    )

    @classmethod
    def of_fields(
        cls,
        role: str,
        content: str | tuple[ContentPart, ...],
        id: str | None,
        name: str | None,
        tool_calls: tuple[ToolCall, ...],
        tool_call_id: str | None,
        metadata: Mapping[str, Any],
    ) -> Message:
        """A message from fields in their final form (a known role, a string or a tuple
        of parts, a tuple of calls, a ``metadata`` dict the message owns, an empty one
        replaced by the shared :data:`NO_METADATA`): built without the constructor's
        conversions and checks, for adapters converting whole histories (the result
        equals what the constructor builds)."""
        message = _new(cls)
        set_role, set_content, set_id, set_name, set_calls, set_call_id, set_meta, set_cache = (
            _MESSAGE_SLOTS
        )
        set_role(message, role)
        set_content(message, content)
        set_id(message, id)
        set_name(message, name)
        set_calls(message, tool_calls)
        set_call_id(message, tool_call_id)
        set_meta(message, metadata or NO_METADATA)
        set_cache(message, {})
        return message

    @property
    def text(self) -> str:
        """The text of the message: the string content, or its text parts joined."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if p.text is not None)

    def with_content(self, content: str | Iterable[ContentPart], **metadata: Any) -> Message:
        """A copy with new content and extra metadata (the original is untouched)."""
        merged = {**self.metadata, **metadata}
        if type(self) is not Message:  # a subclass builds its own copies
            return attrs.evolve(self, content=content, metadata=merged)
        # what attrs.evolve builds, without its constructor's pass over every field: the
        # other fields are already in their final form (the role checked, calls a tuple)
        return Message.of_fields(
            self.role,
            _content(content),
            self.id,
            self.name,
            self.tool_calls,
            self.tool_call_id,
            merged,
        )


#: the setters of a message's slots, in :meth:`Message.of_fields`'s order (a slot's own
#: setter: a frozen class's fields set without ``object.__setattr__``'s lookup of each)
_MESSAGE_SLOTS = tuple(
    Message.__dict__[name].__set__
    for name in "role content id name tool_calls tool_call_id metadata _cache".split()
)


# ---------------------------------------------------------------- ARS's own JSON


def _part_to_dict(part: ContentPart) -> dict[str, Any]:
    out: dict[str, Any] = {"type": part.type}
    if part.text is not None:
        out["text"] = part.text
    if part.data:
        out["data"] = dict(part.data)
    return out


def message_to_dict(message: Message) -> dict[str, Any]:
    """Lossless, JSON-serialisable form of a message (see :func:`message_from_dict`)."""
    out: dict[str, Any] = {"role": message.role}
    if isinstance(message.content, str):
        out["content"] = message.content
    else:
        out["content"] = [_part_to_dict(p) for p in message.content]
    if message.id is not None:
        out["id"] = message.id
    if message.name is not None:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "args": dict(c.args)} for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.metadata:
        out["metadata"] = dict(message.metadata)
    return out


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Inverse of :func:`message_to_dict`."""
    if not isinstance(data, Mapping):
        raise MessageFormatError(f"a message must be an object, not {type(data).__name__}")
    try:
        raw = data.get("content", "")
        content: str | tuple[ContentPart, ...]
        if isinstance(raw, str):
            content = raw
        else:
            content = tuple(
                ContentPart(type=p["type"], text=p.get("text"), data=p.get("data") or {})
                for p in raw
            )
        return Message(
            role=data["role"],
            content=content,
            id=data.get("id"),
            name=data.get("name"),
            tool_calls=tuple(
                ToolCall(id=c["id"], name=c["name"], args=c.get("args") or {})
                for c in data.get("tool_calls") or ()
            ),
            tool_call_id=data.get("tool_call_id"),
            metadata=data.get("metadata") or {},
        )
    except (KeyError, TypeError) as exc:
        raise MessageFormatError(f"malformed message: {exc!r}") from exc


# ---------------------------------------------------------------- OpenAI chat completions


def _openai_part(part: Any) -> ContentPart:
    if isinstance(part, str):
        return ContentPart(type="text", text=part)
    if not isinstance(part, Mapping) or "type" not in part:
        raise MessageFormatError(f"content part must be an object with a type, got {part!r:.80}")
    kind = part["type"]
    if kind == "text":
        rest = {k: v for k, v in part.items() if k not in ("type", "text")}
        return ContentPart(type="text", text=part.get("text", ""), data=rest)
    if kind == "image_url":
        return ContentPart(type="image", data=dict(part))
    return ContentPart(type=kind, data=dict(part))


def from_openai(
    data: Mapping[str, Any], *, index: int | None = None, source: str | None = None
) -> Message:
    """Read one OpenAI chat-completions message (``role``, ``content``, ``tool_calls``...)."""
    if not isinstance(data, Mapping):
        raise MessageFormatError("a message must be a JSON object", source=source, index=index)
    role = data.get("role")
    if role not in ROLES:
        if role == "developer":
            role = "system"
        elif role == "function":
            role = "tool"
        else:
            raise MessageFormatError(
                f"unknown or missing role {role!r}", source=source, index=index
            )
    raw = data.get("content")
    content: str | tuple[ContentPart, ...]
    if raw is None:
        content = ""
    elif isinstance(raw, str):
        content = raw
    elif isinstance(raw, list):
        content = tuple(_openai_part(p) for p in raw)
    else:
        raise MessageFormatError("content must be a string or a list", source=source, index=index)
    calls: list[ToolCall] = []
    for call in data.get("tool_calls") or ():
        try:
            fn = call["function"]
            raw_args = fn.get("arguments") or "{}"
            args = json.loads(raw_args) if isinstance(raw_args, str) else dict(raw_args)
            if not isinstance(args, dict):
                args = {"__arguments__": args}
            calls.append(ToolCall(id=str(call["id"]), name=str(fn["name"]), args=args))
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise MessageFormatError(
                f"malformed tool call: {exc!r}", source=source, index=index
            ) from exc
    known = {"role", "content", "tool_calls", "tool_call_id", "name", "id"}
    extra = {k: v for k, v in data.items() if k not in known}
    return Message(
        role=role,
        content=content,
        id=data.get("id"),
        name=data.get("name"),
        tool_calls=tuple(calls),
        tool_call_id=data.get("tool_call_id"),
        metadata={"openai_extra": extra} if extra else {},
    )


@overload
def to_openai(message: Message | Mapping[str, Any]) -> dict[str, Any]: ...


@overload
def to_openai(message: Iterable[Message | Mapping[str, Any]]) -> list[dict[str, Any]]: ...


def to_openai(
    message: Message | Mapping[str, Any] | Iterable[Message | Mapping[str, Any]],
) -> dict[str, Any] | list[dict[str, Any]]:
    """Write a message as an OpenAI chat-completions message, or a list of messages
    (a view) as the list a chat-completions request takes. A message that already
    is an OpenAI dict is returned as a copy (a view may hold both forms)."""
    if isinstance(message, Message | Mapping):
        return _to_openai(message)
    given: object = message
    if isinstance(given, str | bytes):
        raise MessageFormatError(
            f"to_openai takes a Message or a list of them, not {type(given).__name__}"
        )
    return [_to_openai(m) for m in message]


def _to_openai(message: Message | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(message, Mapping):
        return dict(message)
    if not isinstance(message, Message):
        raise MessageFormatError(f"to_openai takes Message records, not {type(message).__name__}")
    out: dict[str, Any] = {"role": message.role}
    if isinstance(message.content, str):
        out["content"] = message.content
    else:
        parts: list[Any] = []
        for p in message.content:
            if p.type == "text":
                parts.append({"type": "text", "text": p.text or "", **p.data})
            else:
                parts.append(dict(p.data) if p.data else {"type": p.type})
        out["content"] = parts
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": json.dumps(dict(c.args), ensure_ascii=False),
                },
            }
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    extra = message.metadata.get("openai_extra")
    if isinstance(extra, Mapping):
        out.update(extra)
    return out


def _iter_json_records(text: str, source: str) -> Iterator[Any]:
    stripped = text.lstrip()
    if not stripped:
        raise MessageFormatError("empty file", source=source)
    if stripped[0] == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MessageFormatError(
                f"invalid JSON: {exc.msg} at line {exc.lineno}", source=source
            ) from exc
        yield from data
        return
    if stripped[0] == "{":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            if isinstance(data.get("messages"), list):
                yield from data["messages"]
                return
            if "role" in data:
                yield data
                return
    # records end at "\n" alone: JSON writes U+2028, U+2029 and U+0085 unescaped inside a
    # string, and str.splitlines would break the record there ("\r" is JSON whitespace)
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as exc:
            raise MessageFormatError(
                f"invalid JSON on line {lineno}: {exc.msg}", source=source
            ) from exc


def read_messages(path: str | Path) -> list[Message]:
    """Read a recorded run: OpenAI chat-completions messages as a JSON array, an
    object with ``messages``, or JSONL (one message a line); ``.gz`` is unpacked.

    Raises :class:`MessageFormatError` for anything that is not a chat transcript,
    including tool messages that answer no earlier tool call.
    """
    p = Path(path)
    source = str(p)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise MessageFormatError(f"cannot read file: {exc.strerror or exc}", source=source) from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unpacked:
                raw = unpacked.read(MAX_RUN_BYTES + 1)  # never more than the cap in memory
        except (OSError, EOFError) as exc:
            raise MessageFormatError(f"corrupt gzip data: {exc}", source=source) from exc
        if len(raw) > MAX_RUN_BYTES:
            raise MessageFormatError(
                f"gzip data unpacks to more than {MAX_RUN_BYTES:,} bytes (the largest run "
                "read; a compression bomb?)",
                source=source,
            )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageFormatError("not UTF-8 text", source=source) from exc
    messages = [
        from_openai(rec, index=i, source=source)
        for i, rec in enumerate(_iter_json_records(text, source))
    ]
    if not messages:
        raise MessageFormatError("no messages", source=source)
    problems = tool_pairing_errors(messages)
    if problems:
        raise MessageFormatError(problems[0], source=source)
    return messages


def tool_pairing_errors(messages: Sequence[Message]) -> list[str]:
    """Tool messages that answer no earlier call (one line each); empty if none."""
    seen: set[str] = set()
    problems: list[str] = []
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            seen.add(c.id)
        if m.role == "tool" and m.tool_call_id not in seen:
            problems.append(
                f"message {i}: tool result {m.tool_call_id!r} answers no earlier tool call"
            )
    return problems


def as_messages(messages: Sequence[Message | Mapping[str, Any]]) -> Sequence[Message]:
    """``messages`` as :class:`Message` records: OpenAI chat-completions dicts are read
    with :func:`from_openai` (as :func:`read_messages` does); a list of messages is
    returned as is. Anything else raises :class:`MessageFormatError`.

    A dict is converted on every call, so long-running callers convert once and
    keep the ``Message`` records (their token counts are cached on them).
    """
    if all(isinstance(m, Message) for m in messages):
        return messages  # type: ignore[return-value]
    out: list[Message] = []
    for i, m in enumerate(messages):
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            out.append(from_openai(m, index=i, source="<messages>"))
        else:
            raise MessageFormatError(
                f"a {type(m).__name__} is not a message: pass ars_core.Message records "
                "or OpenAI-format dicts (ars_core.from_openai reads one)",
                source="<messages>",
                index=i,
            )
    return out
