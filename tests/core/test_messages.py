"""The message model: lossless round trips and readers for recorded runs."""

from __future__ import annotations

import copy
import gzip
import json
import pickle
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ars_core import (
    ContentPart,
    Message,
    MessageFormatError,
    ToolCall,
    from_openai,
    message_from_dict,
    message_to_dict,
    read_messages,
    to_openai,
)
from ars_core.messages import NO_METADATA
from ars_core.replay import SAMPLE_DIR

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
parts = st.builds(
    ContentPart,
    type=st.sampled_from(["text", "image", "audio"]),
    text=st.none() | st.text(max_size=30),
    data=st.dictionaries(st.text(min_size=1, max_size=5), json_values, max_size=2),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.text(max_size=60) | st.lists(parts, max_size=3).map(tuple),
    id=st.none() | st.text(min_size=1, max_size=8),
    name=st.none() | st.text(max_size=8),
    tool_calls=st.lists(
        st.builds(
            ToolCall,
            id=st.text(min_size=1, max_size=6),
            name=st.text(min_size=1, max_size=8),
            args=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
        ),
        max_size=2,
    ).map(tuple),
    tool_call_id=st.none() | st.text(max_size=6),
    metadata=st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=2),
)


class TestJsonRoundTrip:
    @given(messages)
    def test_message_survives_json(self, message: Message) -> None:
        """ARS's own JSON form is lossless: ids, tool calls, parts, metadata."""
        assert message_from_dict(json.loads(json.dumps(message_to_dict(message)))) == message

    def test_frozen(self) -> None:
        m = Message(role="user", content="x")
        with pytest.raises(AttributeError):
            m.content = "y"  # type: ignore[misc]

    def test_bad_role(self) -> None:
        with pytest.raises(MessageFormatError, match="unknown role"):
            Message(role="robot", content="x")


class TestNoMetadata:
    """Messages without metadata share one empty mapping (no dict of 64 bytes each):
    equal to ``{}`` and shown as ``{}``, read-only, copied and pickled as a plain ``{}``."""

    def _without(self) -> list[Message]:
        m = Message(role="user", content="x")
        return [
            m,
            Message(role="user", content="x", metadata={}),
            from_openai({"role": "assistant", "content": "y"}),
            m.with_content("z"),
            attrs.evolve(m, id="i"),
            Message.of_fields("user", "x", None, None, (), None, {}),
            message_from_dict(message_to_dict(m)),
        ]

    @pytest.mark.spec("R10")
    def test_messages_without_metadata_share_one_read_only_empty_mapping(self) -> None:
        shared = self._without()
        assert all(m.metadata is NO_METADATA for m in shared)
        assert NO_METADATA == {} and {} == NO_METADATA and not NO_METADATA
        assert repr(shared[0]).endswith("metadata={})") and "metadata" not in message_to_dict(
            shared[0]
        )
        writes = [
            lambda md: md.__setitem__("k", 1),
            lambda md: md.__delitem__("k"),
            lambda md: md.update(k=1),
            lambda md: md.setdefault("k", 1),
            lambda md: md.pop("k", None),
            lambda md: md.popitem(),
            lambda md: md.clear(),
            lambda md: md.__ior__({"k": 1}),
        ]
        for write in writes:
            with pytest.raises(TypeError, match="read-only"):
                write(shared[0].metadata)
        assert all(m.metadata == {} and len(m.metadata) == 0 for m in shared)
        with pytest.raises(TypeError):  # a message is not hashable, as before
            hash(shared[0])

    @pytest.mark.spec("R10")
    @pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle", "dict", "merge"])
    def test_a_copy_of_the_shared_empty_metadata_is_a_plain_dict(self, how: str) -> None:
        md = Message(role="user", content="x").metadata
        made: Any = {
            "copy": lambda: copy.copy(md),
            "deepcopy": lambda: copy.deepcopy(md),
            "pickle": lambda: pickle.loads(pickle.dumps(md)),
            "dict": lambda: dict(md),
            "merge": lambda: {**md},
        }[how]()
        assert type(made) is dict and made == {}
        made["k"] = 1  # a plain dict of its own
        assert md == {} and Message(role="user", content="x").metadata == {}

    @pytest.mark.spec("R10")
    @pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
    def test_a_message_copied_or_pickled_is_equal(self, how: str) -> None:
        for m in [*self._without(), Message(role="tool", content="r", metadata={"k": [1]})]:
            other = {
                "copy": copy.copy,
                "deepcopy": copy.deepcopy,
                "pickle": lambda x: pickle.loads(pickle.dumps(x)),
            }[how](m)
            assert other == m and repr(other) == repr(m) and other.metadata == m.metadata

    def test_metadata_given_is_a_dict_of_the_messages_own(self) -> None:
        given = {"k": 1}
        a, b = Message(role="user", metadata=given), Message(role="user", metadata=given)
        assert type(a.metadata) is dict and a.metadata == given
        assert a.metadata is not given and a.metadata is not b.metadata


class TestCopies:
    @pytest.mark.spec("R2")
    @given(messages, st.text(max_size=20) | st.lists(parts, max_size=2), st.booleans())
    def test_with_content_is_the_constructors_copy(
        self, message: Message, content: str | list[ContentPart], marked: bool
    ) -> None:
        """L1's copies (:meth:`Message.with_content`) are what the constructor builds
        from the message's fields with the new content and merged metadata: equal, a
        plain ``Message``, parts made a tuple, scratch space of their own, the original
        untouched."""
        extra = {"ars_offloaded": "outputs/x.txt"} if marked else {}
        before = message_to_dict(message)
        message._cache["k"] = 1
        copy = message.with_content(content, **extra)
        expected = Message(
            role=message.role,
            content=content,
            id=message.id,
            name=message.name,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
            metadata={**message.metadata, **extra},
        )
        assert copy == expected and type(copy) is Message
        assert message_to_dict(copy) == message_to_dict(expected)
        assert isinstance(copy.content, str | tuple) and copy._cache == {}
        copy._cache["other"] = 2
        assert message._cache == {"k": 1} and message_to_dict(message) == before
        # no write through the copy's metadata reaches the original's: its own dict, or
        # (neither has any) the one read-only empty mapping messages without any share
        assert copy.metadata is not message.metadata or copy.metadata is NO_METADATA

    @pytest.mark.spec("R2")
    def test_with_content_checks_the_new_content(self) -> None:
        with pytest.raises(MessageFormatError, match="content part"):
            Message(role="user", content="x").with_content(["not a part"])  # type: ignore[list-item]


class TestOpenAI:
    def test_tool_calls_round_trip(self) -> None:
        raw = {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                }
            ],
        }
        m = from_openai(raw)
        assert m.tool_calls == (ToolCall(id="c1", name="bash", args={"command": "ls"}),)
        assert to_openai(m) == raw

    def test_multimodal_round_trip(self) -> None:
        raw = {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,AAA", "detail": "low"},
                },
            ],
        }
        m = from_openai(raw)
        assert m.text == "what is this?" and m.content[1].type == "image"
        assert to_openai(m) == raw

    def test_extra_fields_kept(self) -> None:
        raw = {"role": "assistant", "content": "x", "refusal": None, "audio": {"id": "a"}}
        assert to_openai(from_openai(raw)) == raw


class TestReadMessages:
    def write(self, tmp_path: Path, name: str, data: bytes) -> Path:
        p = tmp_path / name
        p.write_bytes(data)
        return p

    @staticmethod
    def assert_round_trips(path: Path) -> None:
        msgs = read_messages(path)
        lines = [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]
        assert len(msgs) == len(lines) > 0
        assert [to_openai(m) for m in msgs] == lines

    def test_jsonl_gz_trajectory(self, trajectories_dir: Path) -> None:
        self.assert_round_trips(trajectories_dir / "django__django-11133.jsonl.gz")

    @pytest.mark.parametrize("path", sorted(SAMPLE_DIR.glob("*.jsonl.gz")), ids=lambda p: p.name)
    def test_jsonl_gz_sample_runs_shipped_with_the_package(self, path: Path) -> None:
        """The same on the runs in the wheel (a clone without the shared runs has these)."""
        self.assert_round_trips(path)

    def test_json_array_and_messages_object(self, tmp_path: Path) -> None:
        data = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
        a = read_messages(self.write(tmp_path, "a.json", json.dumps(data).encode()))
        b = read_messages(self.write(tmp_path, "b.json", json.dumps({"messages": data}).encode()))
        assert a == b and [m.text for m in a] == ["a", "b"]

    @pytest.mark.parametrize(
        ("content", "match"),
        [
            (b"", "empty file"),
            (b"not json at all", "invalid JSON on line 1"),
            (b'{"role": "wizard", "content": "x"}', "unknown or missing role"),
            (
                b'{"role": "tool", "tool_call_id": "zz", "content": "x"}',
                "answers no earlier tool call",
            ),
            (b"\xff\xfe", "not UTF-8"),
            (b"\x1f\x8bbroken", "corrupt gzip"),
        ],
    )
    def test_bad_input_is_a_typed_error(self, tmp_path: Path, content: bytes, match: str) -> None:
        with pytest.raises(MessageFormatError, match=match) as info:
            read_messages(self.write(tmp_path, "x.jsonl", content))
        assert info.value.source == str(tmp_path / "x.jsonl")

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(MessageFormatError, match="cannot read file"):
            read_messages(tmp_path / "nope.jsonl")
