"""The history archive: what an L2 round summarizes, saved losslessly.

An archive is a JSONL file under ``outputs/conversation_history/``: a header
line (``ars_history``, ``start``, ``end``, ``count``, ``thread``), then one
line per state message as :func:`~ars_core.messages.message_to_dict` writes
it. Its name holds the range and a hash of its content, so a file is written
once and never changed, and a retry writes the same file.

Each message is encoded once (:func:`archive_line`, kept with the latest
archive), so an archive is a join of bytes. When this process already archived the same
first messages for the same thread and range start (a round whose summary was
not kept: a stateless caller resending the whole history, a retry, a dropped
summary), the round writes only what is new: a *continuation* file whose
header names the file holding the earlier messages (``continues``). Reading
a continuation with :func:`read_archive` follows that chain.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import attrs

from . import memo
from .capabilities import keeps_writes
from .errors import ArchiveFormatError, MessageFormatError
from .files import FileBackend
from .l1 import FileWrite
from .layout import HISTORY_DIR
from .memo import unchanged_prefix
from .messages import Message, message_from_dict, message_to_dict
from .paths import encode_text

__all__ = [
    "HISTORY_DIR",
    "ArchiveLog",
    "ArchivePlan",
    "ArchivedRange",
    "HistoryArchive",
    "archive_line",
    "history_file",
    "read_archive",
    "read_history",
]

_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
#: a JSON string as :data:`_ENCODER` writes it (UTF-8 text left as it is)
_STRING = json.encoder.encode_basestring
#: a JSON string with every character from U+007F up escaped: the same text as
#: :data:`_STRING` for a string below U+007F, made by the faster of the two C encoders
_ASCII_STRING = json.encoder.encode_basestring_ascii


def archive_line(message: Message) -> tuple[bytes, bytes]:
    """``message`` as one line of a history archive (:func:`message_to_dict` as JSON,
    encoded as :func:`~ars_core.paths.encode_text` stores text) and the SHA-256
    digest of that line.

    The lines of the latest archive an engine built are kept by its memo
    (:class:`LatestLines`, one range, not on every message: no second copy of the
    whole history's text): a round redone over the same messages, or over them
    plus new ones, or with one replaced, encodes only what is new."""
    kept = _latest().line_of(message)
    return kept if kept is not None else _encoded(message)


def _encoded(message: Message) -> tuple[bytes, bytes]:
    line = encode_text(_message_json(message))
    return line, hashlib.sha256(line).digest()


def _message_json(m: Message) -> str:
    """``_json(message_to_dict(m))``, the same text, written from the message's fields
    (no dict of them made first) for a message whose content is a string; one with
    content parts goes through :func:`message_to_dict`."""
    content = m.content
    if not isinstance(content, str):
        return _json(message_to_dict(m))
    parts = ['{"role": ', _value(m.role), ', "content": ', _string(content)]
    if m.id is not None:
        parts += (', "id": ', _value(m.id))
    if m.name is not None:
        parts += (', "name": ', _value(m.name))
    if m.tool_calls:
        opening = ', "tool_calls": [{"id": '
        for c in m.tool_calls:
            parts += (opening, _value(c.id), ', "name": ', _value(c.name), ', "args": ')
            parts += (_object(c.args), "}")
            opening = ', {"id": '
        parts.append("]")
    if m.tool_call_id is not None:
        parts += (', "tool_call_id": ', _value(m.tool_call_id))
    if m.metadata:
        parts += (', "metadata": ', _object(m.metadata))
    parts.append("}")
    return "".join(parts)


def _object(mapping: Any) -> str:
    """``_ENCODER.encode(dict(mapping))``, the same text: string keys to strings or to
    empty dicts (a tool call's arguments, most of them; an adapter's metadata) are
    written item by item, without the encoder's setup for every call; anything else
    goes through the encoder."""
    items = dict(mapping)
    parts = []
    for key, value in items.items():
        if type(key) is not str:
            return _ENCODER.encode(items)
        if type(value) is str:
            parts.append(_string(key) + ": " + _string(value))
        elif isinstance(value, dict) and not dict.__len__(value):  # as the encoder sizes it
            parts.append(_string(key) + ": {}")
        else:
            return _ENCODER.encode(items)
    return "{" + ", ".join(parts) + "}"


def _value(value: Any) -> str:
    return _string(value) if isinstance(value, str) else _ENCODER.encode(value)


def _json(fields: dict[str, Any]) -> str:
    """``_ENCODER.encode(fields)``, the same text, made a field at a time and joined
    once (a message's text is copied once, as the encoder's own join does): a string
    field (a message's text is most of its line) below U+007F through the ASCII
    encoder (about a third faster), any other value as the encoder writes it."""
    parts: list[str] = []
    for key, value in fields.items():
        parts += (
            ", " if parts else "{",
            _KEYS.get(key) or _STRING(key) + ": ",
            _value(value),
        )
    parts.append("}")
    return "".join(parts)


#: each field name of :func:`message_to_dict` as a JSON object's key
_KEYS = {
    key: _STRING(key) + ": "
    for key in ("role", "content", "id", "name", "tool_calls", "tool_call_id", "metadata")
}


def _string(text: str) -> str:
    return _ASCII_STRING(text) if text.isascii() and "\x7f" not in text else _STRING(text)


def _latest() -> LatestLines:
    return memo.current().single("archive:lines", LatestLines)


class LatestLines:
    """The lines (and their digests) of the latest history archive an engine built, one
    range: the next round's archive, over the same first messages plus new ones (the
    :func:`~ars_core.memo.unchanged_prefix` rule), encodes only the new ones; any other
    range finds each message it shares with this one by identity."""

    __slots__ = ("_by_id", "digests", "lines", "lock", "messages")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.lines: list[bytes] = []
        self.digests: list[bytes] = []
        self._by_id: dict[int, int] | None = None
        self.lock = threading.Lock()

    def line_of(self, message: Message) -> tuple[bytes, bytes] | None:
        """The line of ``message`` when the latest archive holds it (that very object)."""
        with self.lock:
            return self._line_of(message)

    def _line_of(self, message: Message) -> tuple[bytes, bytes] | None:
        if self._by_id is None:
            self._by_id = {id(m): i for i, m in enumerate(self.messages)}
        i = self._by_id.get(id(message))
        if i is None or self.messages[i] is not message:
            return None
        return self.lines[i], self.digests[i]

    def encode(self, messages: Sequence[Message]) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
        """The lines and digests of ``messages``, which become the latest archive."""
        with self.lock:
            if unchanged_prefix(self.messages, messages):
                n = min(len(self.messages), len(messages))
                del self.messages[n:], self.lines[n:], self.digests[n:]
                entries = [_encoded(m) for m in messages[n:]]
            else:
                n = 0
                entries = [self._line_of(m) or _encoded(m) for m in messages]
                del self.messages[:], self.lines[:], self.digests[:]
            self._by_id = None
            self.messages += messages[n:]
            self.lines += [line for line, _ in entries]
            self.digests += [digest for _, digest in entries]
            return tuple(self.lines), tuple(self.digests)


@attrs.frozen
class ArchivedRange:
    """What one written archive file (with the files it continues) holds: state
    messages ``[start, end)`` of ``thread``, by their line digests."""

    path: str
    thread: str | None
    start: int
    digests: tuple[bytes, ...]
    continues: str | None = None  # the file with the first messages, when ``path`` continues it
    #: every file of the chain, ``path`` first (empty: ``path`` and ``continues``)
    chain: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        if self.chain:
            return self.chain
        return (self.path,) if self.continues is None else (self.path, self.continues)


@attrs.frozen
class ArchivePlan:
    """How a round's archive is stored: the file to write (``None`` when this
    process already wrote the same range), the path the event names, and the
    earlier file it continues."""

    write: FileWrite | None
    path: str
    continues: str | None = None
    chain: tuple[str, ...] = ()  # every file of the chain, ``path`` first


@attrs.frozen
class HistoryArchive:
    """The archive of state messages ``[start, end)``: their encoded lines."""

    start: int
    thread: str | None
    lines: tuple[bytes, ...]
    digests: tuple[bytes, ...]

    @classmethod
    def of(
        cls, messages: Sequence[Message], *, start: int, thread: str | None = None
    ) -> HistoryArchive:
        # the engine keeps this archive's lines (and only this one's) for the next round
        lines, digests = _latest().encode(messages)
        return cls(start, thread, lines, digests)

    @property
    def end(self) -> int:
        return self.start + len(self.lines)

    def whole(self) -> FileWrite:
        """The file holding every message of the range."""
        return self._file(self.start, 0, None)

    def continuing(self, earlier: ArchivedRange) -> FileWrite | None:
        """The file holding only what follows ``earlier`` (which holds this range's
        first messages), naming it in its header; ``None`` when ``earlier`` is not
        such a prefix of this range."""
        held = len(earlier.digests)
        if not (
            earlier.start == self.start
            and earlier.thread == self.thread
            and 0 < held < len(self.digests)
            and self.digests[:held] == earlier.digests
        ):
            return None
        return self._file(self.start + held, held, earlier.path)

    def _file(self, first: int, skip: int, continues: str | None) -> FileWrite:
        header: dict[str, Any] = {
            "ars_history": 1,
            "start": first,
            "end": self.end,
            "count": self.end - first,
        }
        if self.thread is not None:
            header["thread"] = self.thread
        if continues is not None:  # the messages [start, first) are in that file (and its chain)
            header["continues"] = continues
            header["chain_start"] = self.start
        head = encode_text(json.dumps(header, ensure_ascii=False))
        digest = hashlib.sha256(head)
        digest.update(b"".join(self.digests[skip:]))
        path = f"{HISTORY_DIR}/history-{first:06d}-{self.end:06d}-{digest.hexdigest()[:16]}.jsonl"
        return FileWrite(path, lines=(head, *self.lines[skip:]))  # written as pieces

    def written(self, plan: ArchivePlan) -> ArchivedRange:
        return ArchivedRange(
            plan.path, self.thread, self.start, self.digests, plan.continues, plan.chain
        )


def history_file(
    messages: Sequence[Message], *, start: int, end: int, thread: str | None = None
) -> FileWrite:
    """The archive of state messages ``[start, end)`` as one lossless JSONL file.

    Line 1 is a header (``ars_history``, ``start``, ``end``, ``count``,
    ``thread``); each further line is one message as :func:`message_to_dict`
    writes it (:func:`archive_line`). The name holds the range and a content
    hash (of the header and of every line's digest), so a retry writes the same
    file.
    """
    archive = HistoryArchive.of(messages, start=start, thread=thread)
    if archive.end != end:
        raise ValueError(f"{len(messages)} messages cannot be the range [{start}, {end})")
    return archive.whole()


class ArchiveLog:
    """What this process archived, per backend: for each thread and range start,
    the latest archive written, so a round that archives the same first messages
    again writes only a continuation (:meth:`HistoryArchive.continuing`)."""

    #: archives remembered per backend (the latest few threads)
    SLOTS = 64

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_backend: weakref.WeakKeyDictionary[Any, dict[Any, ArchivedRange]] = (
            weakref.WeakKeyDictionary()
        )

    def _slots(self, backend: FileBackend) -> dict[Any, ArchivedRange]:
        try:
            return self._by_backend.setdefault(backend, {})
        except TypeError:  # not weak-referenceable: nothing is remembered for it
            return {}

    def plan(self, backend: FileBackend, archive: HistoryArchive) -> ArchivePlan:
        """How to store ``archive`` on ``backend``: whole, as a continuation of the
        latest archive of the same first messages, or not at all (already there).
        An earlier archive is relied on as written on a backend that keeps what it
        wrote (:func:`~ars_core.capabilities.keeps_writes`: nothing is asked of it,
        however long the chain), elsewhere only while every file of its chain still
        exists on ``backend``."""
        with self._lock:
            earlier = self._slots(backend).get((archive.thread, archive.start))
        if earlier is not None and (keeps_writes(backend) or _all_exist(backend, earlier.files)):
            if earlier.digests == archive.digests:
                return ArchivePlan(None, earlier.path, earlier.continues, earlier.files)
            continuation = archive.continuing(earlier)
            if continuation is not None:
                chain = (continuation.path, *earlier.files)
                return ArchivePlan(continuation, continuation.path, earlier.path, chain)
        whole = archive.whole()
        return ArchivePlan(whole, whole.path, chain=(whole.path,))

    def record(self, backend: FileBackend, archive: HistoryArchive, plan: ArchivePlan) -> None:
        """``plan`` was stored: its path now holds ``archive`` (with the file it continues)."""
        with self._lock:
            slots = self._slots(backend)
            key = (archive.thread, archive.start)
            slots.pop(key, None)
            slots[key] = archive.written(plan)
            while len(slots) > self.SLOTS:
                del slots[next(iter(slots))]


def _all_exist(backend: FileBackend, paths: Sequence[str]) -> bool:
    """Whether every file of an earlier archive's chain is still there. A write this
    process made may be gone: deepagents' ``StateBackend`` keeps files in the graph
    state, and a step that failed after the write (the main model answering 503)
    drops it with the step; a thread may be forked from an older checkpoint. Then
    the round writes the whole range again instead of naming a missing file."""
    try:
        return all(backend.exists(path) for path in paths)
    except Exception:  # cannot tell: write the whole range
        return False


def read_history(text: str, *, source: str | None = None) -> tuple[dict[str, Any], list[Message]]:
    """Read one archive file: ``(header, messages)`` (a continuation's own messages;
    :func:`read_archive` follows the chain).

    The file is checked as it is read: a JSON-object header with whole-number
    ``start``, ``end`` and ``count`` (``end - start == count``, ``count`` the number
    of message lines), and every further line a message. Anything else raises
    :class:`~ars_core.errors.ArchiveFormatError` naming ``source`` (the path)."""
    # lines end at "\n" alone: a JSON line holds no "\n" (written "\\n") but may hold the
    # other breaks ``str.splitlines`` knows (U+2028, U+0085...), kept as UTF-8 text
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        raise ArchiveFormatError("the file is empty (no header line)", source=source)
    header = _json_line(lines[0], source, 0)
    if not isinstance(header, dict):
        raise ArchiveFormatError(
            f"the header is a JSON {type(header).__name__}, not an object", source=source
        )
    start, end, count = (_whole(header, key, source) for key in ("start", "end", "count"))
    if start < 0 or end - start != count:
        raise ArchiveFormatError(
            f"the header's range [{start}, {end}) does not hold its count {count}", source=source
        )
    if count != len(lines) - 1:
        raise ArchiveFormatError(
            f"the header counts {count} messages but the file holds {len(lines) - 1}",
            source=source,
        )
    messages = []
    for number, line in enumerate(lines[1:], start=1):
        data = _json_line(line, source, number)
        try:
            messages.append(message_from_dict(data))
        except MessageFormatError as exc:
            raise ArchiveFormatError(f"line {number + 1}: {exc.reason}", source=source) from exc
    return header, messages


def _json_line(line: str, source: str | None, number: int) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise ArchiveFormatError(f"line {number + 1} is not JSON: {exc}", source=source) from exc


def _whole(header: dict[str, Any], key: str, source: str | None) -> int:
    value = header.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArchiveFormatError(
            f"the header's {key!r} is {value!r}, not a whole number", source=source
        )
    return value


def read_archive(backend: FileBackend, path: str) -> list[Message]:
    """Every message an archive holds, following its ``continues`` chain.

    The chain is checked: each continued file must end where the file
    continuing it starts, the chain must reach the ``chain_start`` the newest
    file names, and no file may continue itself or an earlier link (a cycle).
    A broken chain or a malformed file raises
    :class:`~ars_core.errors.ArchiveFormatError`; a missing file
    :class:`~ars_core.errors.FileBackendError`."""
    parts: list[list[Message]] = []
    seen: set[str] = set()
    next_path: str | None = path
    expected_end: int | None = None  # where the next (earlier) file must end
    chain_start: int | None = None
    while next_path is not None:
        if next_path in seen:
            raise ArchiveFormatError(
                f"the chain of continued files loops back to {next_path!r}", source=path
            )
        seen.add(next_path)
        header, messages = read_history(backend.read_text(next_path), source=next_path)
        if expected_end is not None and header["end"] != expected_end:
            raise ArchiveFormatError(
                f"{next_path!r} ends at message {header['end']} but the file continuing it "
                f"starts at {expected_end} (a gap in the chain)",
                source=path,
            )
        if chain_start is None and "chain_start" in header:
            chain_start = _whole(header, "chain_start", next_path)
        parts.append(messages)
        expected_end = header["start"]
        continues = header.get("continues")
        if continues is not None and not isinstance(continues, str):
            raise ArchiveFormatError(
                f"the header's 'continues' is {continues!r}, not a path", source=next_path
            )
        next_path = continues
    if chain_start is not None and expected_end != chain_start:
        raise ArchiveFormatError(
            f"the chain starts at message {expected_end}, not at {chain_start} as its newest "
            "file says",
            source=path,
        )
    return [m for part in reversed(parts) for m in part]
