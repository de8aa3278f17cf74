"""L1: temporary structural trimming of one request's view.

Pure functions over a copy of the effective messages; the state is never
touched. Two actions:

* every ``write_file``/``edit_file`` call argument longer than ``arg_char_limit``
  (2,000 characters) becomes a truncation marker in the copy;
* every tool result above ``summary_tool_result_token_limit`` estimated tokens
  is written in full to ``outputs/large_tool_results/<tool>-<sha256>.txt``
  and, in the copy, replaced by that path and a preview — its head and its
  tail — that fits the same token budget. A message already carrying the offload marker is left
  as it is, and the same content always maps to the same path.

:mod:`ars_core.l1_user` applies the same rule to a user message larger than the
entry threshold ``T`` (it could never be sent):
``outputs/large_user_messages/user-<sha256>.txt`` and a preview, in the view only.

:mod:`ars_core.l1_media` moves inline base64 media (images, audio,
documents) of answered messages to ``outputs/media/`` files the same way.

:func:`plan_l1` returns the view *as if* every write succeeds plus the writes
to make; :meth:`L1Plan.finalize` puts the original message back wherever its
write failed, so a failed write never loses text from the view.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import cast

import attrs

from . import memo
from ._tiktoken_offline import load_encoding
from .bounds import Utf8Bytes, digit_groups_are_tokens, head_tokens_below, utf8_length
from .estimate import (
    MESSAGE_OVERHEAD,
    ApproxEstimator,
    CachingEstimator,
    Estimator,
    TiktokenEstimator,
    is_bounded,
    message_tokens,
)
from .floors import counts_by_pieces, head_floor
from .layout import LARGE_TOOL_RESULTS_DIR, LARGE_USER_MESSAGES_DIR
from .memo import L1_PLAN, TOKENS, estimator_key
from .messages import (
    MARK_OFFLOADED,
    MARK_SUMMARY,
    MARK_TRUNCATED_ARGS,
    ContentPart,
    Message,
    ToolCall,
)
from .paths import decode_text, encode_text, sanitize_name, text_sha256
from .pending_form import pending_form
from .preview_fit import GAP_LINE, fit_head_and_tail, fit_preview

__all__ = [
    "ARG_CHAR_LIMIT",
    "LARGE_TOOL_RESULTS_DIR",
    "LARGE_USER_MESSAGES_DIR",
    "OFFLOAD_HEADER",
    "TRUNCATE_TOOLS",
    "FileWrite",
    "L1Plan",
    "fit_head_and_tail",
    "fit_preview",
    "offload_body",
    "plan_l1",
    "sha256_text",
    "truncation_marker",
]

#: argument values longer than this are truncated in the view (an internal constant)
ARG_CHAR_LIMIT = 2000
#: the tools whose large arguments are truncated
TRUNCATE_TOOLS: tuple[str, ...] = ("write_file", "edit_file")


@attrs.frozen
class FileWrite:
    """A text file to write under a virtual path: its ``text``, that text already
    encoded (``data``, as :func:`~ars_core.paths.encode_text` gives it), or its
    encoded ``lines`` (the file is each line followed by a newline: a history archive,
    built from lines kept per message) when the engine built it from encoded pieces.
    Any form gives the others on demand; a backend with ``write_bytes`` takes
    ``data`` as it is, and one with ``write_files`` takes the :attr:`pieces`, so a
    large archive is never decoded, encoded or joined into one copy again."""

    path: str
    _text: str | None = attrs.field(default=None, alias="text")
    _data: bytes | None = attrs.field(default=None, alias="data", repr=False)
    _lines: tuple[bytes, ...] | None = attrs.field(default=None, alias="lines", repr=False)

    def __attrs_post_init__(self) -> None:
        if self._text is None and self._data is None and self._lines is None:
            raise TypeError("a FileWrite needs its text, its encoded data or its lines")

    @property
    def text(self) -> str:
        """The file's text."""
        return self._text if self._text is not None else decode_text(self.data)

    @property
    def data(self) -> bytes:
        """The file's bytes as ARS stores them."""
        if self._data is not None:
            return self._data
        if self._lines is not None:
            return b"\n".join(self._lines) + b"\n"
        return encode_text(cast(str, self._text))

    @property
    def pieces(self) -> Sequence[bytes]:
        """The file's bytes as pieces to write one after the other (no joined copy)."""
        if self._lines is not None:
            return _Lines(self._lines)
        return (self.data,)


class _Lines(Sequence[bytes]):
    """Lines as the pieces of a file: each line, then a newline."""

    __slots__ = ("_lines",)

    def __init__(self, lines: tuple[bytes, ...]) -> None:
        self._lines = lines

    def __len__(self) -> int:
        return 2 * len(self._lines)

    def __iter__(self) -> Iterator[bytes]:
        for line in self._lines:
            yield line
            yield b"\n"

    def __getitem__(self, i: int) -> bytes:  # type: ignore[override]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        return self._lines[i // 2] if i % 2 == 0 else b"\n"


def sha256_text(text: str) -> str:
    """The hex SHA-256 of any ``str`` (lone surrogates included, see :mod:`ars_core.files`)."""
    return text_sha256(text)


def truncation_marker(tool: str, arg: str, value: str) -> str:
    """What replaces a long ``write_file``/``edit_file`` argument in the view."""
    return (
        f"[ARS: {len(value)} characters of the {tool} argument {arg!r} truncated in this request "
        f"(sha256 {sha256_text(value)[:16]}); the full call is kept in the conversation state]"
    )


#: how an offloaded tool result's body begins
OFFLOAD_HEADER = "[ARS: tool result offloaded: "
#: the words an offload's preview adds to the text it shows
_PREVIEW_WORDING = "\nPreview:\n" + GAP_LINE.format(0)


#: how an offloaded user message's body begins
USER_OFFLOAD_HEADER = "[ARS: user message offloaded: "


def offload_body(
    path: str, original: str, preview: str, total_tokens: int, *, user: bool = False
) -> str:
    """The view's text for an offloaded body: a header naming the file, then the
    preview. ``user`` for a user message (larger than the entry threshold)."""
    opening, what = (USER_OFFLOAD_HEADER, "message") if user else (OFFLOAD_HEADER, "output")
    header = (
        f"{opening}{len(original)} characters (~{total_tokens} tokens) "
        f"saved to {path}. "
        f"Read that file for the full {what}.]"
    )
    return f"{header}\nPreview:\n{preview}" if preview else header


@attrs.frozen
class L1Plan:
    """The L1 view assuming every write succeeds, and the writes to make.

    ``replaced`` maps view index to the original message for every message L1
    changed; ``pending`` maps each offload path to the indices that rely on it.
    """

    view: tuple[Message, ...]
    writes: tuple[FileWrite, ...]
    replaced: Mapping[int, Message]
    pending: Mapping[str, tuple[int, ...]]
    truncated_args: int

    def replacing(self, found: Sequence[tuple[int, Message, Sequence[FileWrite]]]) -> L1Plan:
        """This plan with ``view[i]`` replaced by each ``(i, message, writes)`` of
        ``found``; the original stays the one to restore when a write fails."""
        if not found:
            return self
        view = list(self.view)
        writes = {w.path: w for w in self.writes}
        replaced = dict(self.replaced)
        pending = {p: list(ix) for p, ix in self.pending.items()}
        for i, new, new_writes in found:
            replaced.setdefault(i, view[i])
            view[i] = new
            for write in new_writes:
                writes[write.path] = write
                pending.setdefault(write.path, []).append(i)
        return attrs.evolve(
            self,
            view=tuple(view),
            writes=tuple(writes.values()),
            replaced=replaced,
            pending={p: tuple(ix) for p, ix in pending.items()},
        )

    def finalize(self, failed: Collection[str] = ()) -> tuple[list[Message], tuple[str, ...]]:
        """The view with originals restored where a write failed, and the paths offloaded."""
        view = list(self.view)
        if not failed:  # every write made (the usual case): the planned view, each path
            return view, tuple(self.pending)
        offloaded: list[str] = []
        for path, indices in self.pending.items():
            if path in failed:
                for i in indices:  # keep the original text: nothing leaves the view unsaved
                    view[i] = self.replaced[i]
            else:
                offloaded.append(path)
        return view, tuple(offloaded)


def _truncate_args(message: Message, limit: int, tools: Collection[str]) -> tuple[Message, int]:
    count = 0
    calls: list[ToolCall] = []
    for call in message.tool_calls:
        if call.name in tools and any(
            isinstance(v, str) and len(v) > limit for v in call.args.values()
        ):
            args = {}
            for k, v in call.args.items():
                if isinstance(v, str) and len(v) > limit:
                    args[k] = truncation_marker(call.name, k, v)
                    count += 1
                else:
                    args[k] = v
            calls.append(attrs.evolve(call, args=args))
        else:
            calls.append(call)
    if not count:
        return message, 0
    return attrs.evolve(
        message, tool_calls=tuple(calls), metadata={**message.metadata, MARK_TRUNCATED_ARGS: count}
    ), count


def _offload(
    message: Message, estimator: Estimator, limit: int, *, user: bool = False
) -> tuple[Message, FileWrite]:
    text = message.text
    path = _offload_path(message, text, user)
    kept: tuple[ContentPart, ...] = ()
    if not isinstance(message.content, str):  # non-text parts (images...) stay in the view
        kept = tuple(p for p in message.content if p.text is None)
    body, shell, counted = _offload_text(message, estimator, limit, path, kept, user)
    if isinstance(message.content, str):
        new = message.with_content(body, **{MARK_OFFLOADED: path})
        _keep_count(estimator, new, shell, counted)
        return new, FileWrite(path, text)
    content = (ContentPart(type="text", text=body), *kept)
    return message.with_content(content, **{MARK_OFFLOADED: path}), FileWrite(path, text)


def _offload_path(message: Message, text: str, user: bool) -> str:
    if user:
        return f"{LARGE_USER_MESSAGES_DIR}/user-{sha256_text(text)}.txt"
    tool = sanitize_name(message.name or "tool")
    return f"{LARGE_TOOL_RESULTS_DIR}/{tool}-{sha256_text(text)}.txt"


def _offload_text(
    message: Message,
    estimator: Estimator,
    limit: int,
    path: str,
    kept: tuple[ContentPart, ...],
    user: bool,
) -> tuple[str, int, int | None]:
    """The offloaded body of ``message`` (a header naming ``path`` and a preview), the
    count of the message without its text (its ``shell``) and the body's count when the
    preview fit counted it."""
    text = message.text
    # the message's count is cached from the trigger: the text is not counted a second time
    tokens = max(
        0,
        message_tokens(estimator, message) - message_tokens(estimator, message.with_content(kept)),
    )
    # what the text's message costs besides the text (ids, name): the preview's frame; the
    # kept media are not charged to the preview (the media rule moves them, not the text's)
    shell = message_tokens(estimator, message.with_content(""))
    frame = offload_body(path, text, "", tokens, user=user) + "\nPreview:\n"
    counts: dict[str, int] = {}
    preview = fit_head_and_tail(estimator, text, limit, frame, overhead=shell + 1, counts=counts)
    body = offload_body(path, text, preview, tokens, user=user)
    return body, shell, counts.get(body)


def _pending_offload(
    m: Message, estimator: Estimator, limit: int
) -> tuple[Message, FileWrite] | None:
    """The offload of the tool result ``m`` (a string content, its bound above ``limit``)
    as a pending form (see :mod:`ars_core.pending_form`: its header and preview made
    when first read), when it is certain without making the form: the result is above
    ``limit`` (a head of it alone is, :func:`~ars_core.bounds.head_tokens_below`, else
    by its count), and the form is smaller whatever its preview (a preview fits
    ``limit`` with the header; a header alone is within ``limit``, counted with a token
    count of as many digits as the result's bytes). The approximate estimator's
    offloads are pending too (:func:`_pending_by_features`). ``None`` otherwise, or
    for any other estimator: the form is made at once."""
    text = m.content
    if not isinstance(text, str) or not text:
        return None
    if not _counts_by_pieces(estimator):
        return _pending_by_features(m, text, estimator, limit) if _by_features(estimator) else None
    exact = cast(TiktokenEstimator, estimator)
    encoding = load_encoding(exact.encoding_name)
    # a floor of a head of the text, else the tokens of a head: above the limit alone
    above = TOKENS.get(m, exact.cache_key) is None and (
        MESSAGE_OVERHEAD + head_floor(text, limit) > limit
        or MESSAGE_OVERHEAD + head_tokens_below(encoding, text, limit) > limit
    )
    if not above and message_tokens(exact, m) <= limit:
        return None
    path = _offload_path(m, text, False)
    # the header alone, its count written with as many digits as the text's bytes: no
    # fewer than the count has, each group of three a token
    header = offload_body(path, text, "", utf8_length(text))
    if not digit_groups_are_tokens(encoding) or _shell_and_header_above(exact, m, header, limit):
        return None

    return _pending_form_of(m, text, estimator, limit, path, header)


def _pending_form_of(
    m: Message, text: str, estimator: Estimator, limit: int, path: str, header: str
) -> tuple[Message, FileWrite]:
    """The pending form of the offload of ``m`` to ``path`` and its write."""
    maker = _PendingOffload(m, text, estimator, limit, path, header)
    proto = m.with_content("", **{MARK_OFFLOADED: path})
    return pending_form(proto, maker.fill, maker.may_hold), FileWrite(path, text)


def _by_features(estimator: Estimator) -> bool:
    """Whether ``estimator`` counts as the built-in :class:`ApproxEstimator` does: a
    message as its shell plus its text, a text by a weighted sum of its features
    (which only grows when a digit is added to a number in it)."""
    if not isinstance(estimator, ApproxEstimator):
        return False
    kind = type(estimator)
    return (
        kind.count_text is ApproxEstimator.count_text
        and kind.count_message is CachingEstimator.count_message
        and kind.measure is CachingEstimator.measure
    )


def _pending_by_features(
    m: Message, text: str, estimator: Estimator, limit: int
) -> tuple[Message, FileWrite] | None:
    """:func:`_pending_offload` for the approximate estimator: the result counted above
    ``limit``, and its shell plus the header alone within it, the header's count written
    as the message's own (a form's count is the text's, never more digits)."""
    size = message_tokens(estimator, m)
    if size <= limit:
        return None
    path = _offload_path(m, text, False)
    header = offload_body(path, text, "", size)
    if message_tokens(estimator, m.with_content("")) + estimator.count_text(header) > limit:
        return None
    return _pending_form_of(m, text, estimator, limit, path, header)


class _PendingOffload:
    """What makes the form of a pending offload (:func:`_pending_offload`): one object
    for each form, not a closure's cells and functions."""

    __slots__ = ("estimator", "header", "limit", "m", "path", "text")

    def __init__(
        self, m: Message, text: str, estimator: Estimator, limit: int, path: str, header: str
    ) -> None:
        self.m, self.text, self.estimator, self.limit = m, text, estimator, limit
        self.path, self.header = path, header

    def fill(self, form: Message) -> str:
        m, estimator = self.m, self.estimator
        body, shell, counted = _offload_text(m, estimator, self.limit, self.path, (), False)
        _keep_count(estimator, form, shell, counted)
        return body

    def may_hold(self, word: str) -> bool:  # a line of the form is one of the header, of
        # the text (a piece of one of its lines) or of the preview's own wording
        return word in self.text or word in self.header or word in _PREVIEW_WORDING


def _shell_and_header_above(exact: TiktokenEstimator, m: Message, header: str, limit: int) -> bool:
    """Whether the message ``m`` without its content, plus the text ``header``, counts
    above ``limit``: counted only when their bounds (UTF-8 bytes, never below the
    count) do not already keep them within it. A shell without tool calls is bounded
    from its fields (what :meth:`~ars_core.bounds.Utf8Bytes.measure` counts of it, the
    bound of a shell nothing has counted), without making it."""
    if not m.tool_calls:
        shell_bytes = Utf8Bytes.plain_fields("", m.name, m.tool_call_id)
        if shell_bytes + utf8_length(header) <= limit:
            return False
    shell = m.with_content("")
    if exact.token_bound(shell) + utf8_length(header) <= limit:
        return False
    return message_tokens(exact, shell) + exact.count_text(header) > limit


def _counts_by_pieces(estimator: Estimator) -> bool:
    """Whether ``estimator`` counts a message as the built-in exact ``o200k_base`` one
    does (its pieces' counts add up, see :func:`~ars_core.bounds.head_tokens_below`)."""
    return counts_by_pieces(estimator) and estimator.encoding_name == "o200k_base"  # type: ignore[attr-defined]


def _keep_count(estimator: Estimator, new: Message, shell: int, body: int | None) -> None:
    """Keeps the count of ``new`` (a message whose text the preview fit counted:
    ``body`` tokens) as the built-in estimators count a message with a text content:
    its ``shell`` (the message with no text) plus the text."""
    if body is not None and isinstance(estimator, CachingEstimator):
        kind = type(estimator)  # counting a message as CachingEstimator does
        if kind.count_message is CachingEstimator.count_message:
            if kind.measure is CachingEstimator.measure:
                TOKENS.put(new, shell + body, estimator.cache_key)


def _offloaded_body(message: Message, estimator: Estimator, limit: int) -> bool:
    """Whether ``message`` holds what L1 makes of an offloaded result: the
    marker, a header naming the marked path, and a preview within ``limit``.
    A marker alone is not trusted (a message from elsewhere may carry it over
    its whole, large text)."""
    path = message.metadata.get(MARK_OFFLOADED)
    if not isinstance(path, str):
        return False
    head, _, preview = message.text.partition("\nPreview:\n")
    return (
        head.startswith(OFFLOAD_HEADER)
        and f" saved to {path}. " in head
        and "\n" not in head
        and estimator.count_text(preview) <= limit
    )


def _text_tokens(estimator: Estimator, m: Message, size: int) -> int:
    """Tokens of ``m`` without its media parts (``size`` when it has none): a
    result large only by its images is the media rule's to move, not the text's."""
    if isinstance(m.content, str) or all(p.text is not None for p in m.content):
        return size
    return message_tokens(
        estimator, m.with_content(tuple(p for p in m.content if p.text is not None))
    )


def _above(estimator: Estimator, m: Message, limit: int) -> bool:
    """Whether ``m``'s count is above ``limit``; not counted when its bound (a
    :class:`~ars_core.capabilities.BoundedEstimator`'s) is within ``limit``."""
    if is_bounded(estimator) and estimator.token_bound(m) <= limit:
        return False
    return message_tokens(estimator, m) > limit


#: what L1 makes of one message: its view form, the file to write, arguments truncated
_Planned = tuple[Message, "FileWrite | None", int]
#: the plan kept on a message L1 leaves as it is (its form is the message itself)
_KEPT: _Planned = cast(_Planned, (None, None, 0))


def _plan_message(
    m: Message,
    estimator: Estimator,
    tool_token_limit: int,
    arg_char_limit: int,
    truncate_tools: Collection[str],
) -> _Planned:
    """L1 for one message: a large tool result offloaded, large arguments truncated."""
    meta = m.metadata  # most messages have none (then neither a summary nor offloaded)
    if meta and (meta.get(MARK_SUMMARY) or _offloaded_body(m, estimator, tool_token_limit)):
        return m, None, 0
    if m.role == "tool":
        if is_bounded(estimator) and estimator.token_bound(m) <= tool_token_limit:
            return m, None, 0  # within the limit by its bound: nothing counted
        pending = _pending_offload(m, estimator, tool_token_limit)
        if pending is not None:
            return (*pending, 0)
        size = message_tokens(estimator, m)
        if size <= tool_token_limit:
            return m, None, 0
        if m.text and _text_tokens(estimator, m, size) > tool_token_limit:
            new, write = _offload(m, estimator, tool_token_limit)
            if message_tokens(estimator, new) <= size:  # never larger than the original
                return new, write, 0
        return m, None, 0
    if m.tool_calls:
        new, n = _truncate_args(m, arg_char_limit, truncate_tools)
        return new, None, n
    return m, None, 0


def plan_l1(
    messages: Sequence[Message],
    *,
    estimator: Estimator,
    tool_token_limit: int,
    arg_char_limit: int = ARG_CHAR_LIMIT,
    truncate_tools: Collection[str] = TRUNCATE_TOOLS,
) -> L1Plan:
    """Plan L1 over ``messages`` (the effective messages); nothing is mutated.

    Results are cached on each message, so a message seen by an earlier call
    costs a dictionary lookup; the plan of a history is kept by the engine as
    the history grows, so a call whose history only grew plans the appended
    messages alone.
    """
    key = L1_PLAN.key(
        tool_token_limit, arg_char_limit, tuple(sorted(truncate_tools)), estimator_key(estimator)
    )
    if not messages:
        return L1Plan(view=(), writes=(), replaced={}, pending={}, truncated_args=0)
    remembered = memo.current().prefix("l1:plan", _PlanSoFar)
    with remembered.lock:
        seen, known = remembered.grown(messages, key, _PlanSoFar)
        plan = seen.state
        for i in range(plan.read, len(messages)):
            m = messages[i]
            planned = L1_PLAN.get(m, key)
            if planned is None:
                planned = _plan_message(
                    m, estimator, tool_token_limit, arg_char_limit, truncate_tools
                )
                # a message L1 leaves as it is keeps the one shared mark, not a tuple
                # holding itself (no cycle through its own cache for the collector)
                planned = L1_PLAN.put(m, _KEPT if planned[0] is m else planned, key)
            plan.add(i, m, planned)
        plan.read = len(messages)
        remembered.extend(seen, messages, known)
        # the messages of this history (a remembered one may hold equal, other objects)
        view = list(messages)
        for i, new in plan.forms.items():
            view[i] = new
        return L1Plan(
            view=tuple(view),
            writes=tuple(plan.writes.values()),
            replaced={i: messages[i] for i in plan.forms},
            pending=dict(plan.pending),
            truncated_args=plan.truncated,
        )


class _PlanSoFar:
    """The L1 plan of a history so far (for the plan's ``key``), extended message by
    message as the history grows."""

    __slots__ = ("forms", "key", "pending", "read", "truncated", "writes")

    def __init__(self, key: object = None) -> None:
        self.key = key
        self.read = 0  # messages planned
        self.forms: dict[int, Message] = {}  # the view's form of each message L1 changes
        self.writes: dict[str, FileWrite] = {}
        self.pending: dict[str, tuple[int, ...]] = {}
        self.truncated = 0

    def add(self, i: int, m: Message, planned: _Planned) -> None:
        new, write, n = planned
        if new is m or planned is _KEPT:
            return
        self.forms[i] = new
        self.truncated += n
        if write is not None:
            self.writes[write.path] = write
            self.pending[write.path] = (*self.pending.get(write.path, ()), i)
