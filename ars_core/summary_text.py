"""The text of a summary: the sections ARS writes, and what an earlier summary said.

ARS's extractive summaries are sections opened by :data:`SECTION_MARK` lines
that message text cannot produce (a line of text starting like one is escaped
with a backslash), so a chained summary reads the previous one back exactly.

:func:`read_earlier` reads a summary already in the history, whoever wrote it,
into what the next summary merges: ARS's own sections, the ``## `` sections
and free text of a summary a model wrote (ARS's summary model, LangChain's
``SummarizationMiddleware``), and the archive files that hold the summarized
messages (the summary message's frame names them; a summary only ever says
where its own round's messages are, so the next one carries the list on).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from .messages import Message

__all__ = [
    "ARCHIVES_HEADER",
    "MARK_OMITTED",
    "MIN_REQUEST_CHARS",
    "NOTE_CHARS",
    "OMITTED_ITEMS",
    "OTHER_REQUESTS",
    "REQUEST_ELIDED",
    "SECTION_MARK",
    "SHORTENED_TEXT",
    "SUMMARY_HEADER",
    "TEXT_LEFT_OUT",
    "Earlier",
    "archives_section",
    "bullets",
    "clip",
    "end_mark",
    "escape",
    "fair_shares",
    "items",
    "one_line",
    "parse_summary",
    "read_earlier",
    "section",
    "share_chars",
    "shorten_text",
    "summary_body",
]

#: opens every line that starts a section of an extractive summary; a line of
#: message text that starts like this is escaped with a backslash, so a task
#: can never end or open a section (markdown headings are ordinary text)
SECTION_MARK = "⟦ARS⟧"
#: the section of a summary that lists where earlier summarized messages are saved
ARCHIVES_HEADER = "Earlier messages are saved at"
#: the section of an agent run's summary that lists the user requests besides the task
OTHER_REQUESTS = "Other user requests"
#: the section that holds a summarizer's own text (not in ARS's sections) after the task
SUMMARY_HEADER = "Summary"
END = "end of summary"
_ESCAPED = re.compile(r"^(\\*)" + re.escape(SECTION_MARK))

# ARS's summary message frame (see ars_core.l2.build_summary_message) and LangChain's
_OPENING = re.compile(
    r"^(?:Summary of the earlier conversation \(messages 1-(\d+);[^\n]*\):"
    r"|Here is a summary of the conversation to date:)\s*$"
)
_FAILED = re.compile(r"^\[ARS: the summary model failed: [^\n]*\]\s*$")
_SAVED = re.compile(
    r"^The full text of those messages is saved at (\S+?)(?:, which continues (\S+?))?\.\s*$"
)


def escape(text: str) -> str:
    """``text`` with every line that starts like a section mark escaped."""
    if SECTION_MARK not in text:
        return text
    return "\n".join(_ESCAPED.sub(r"\\\1" + SECTION_MARK, ln) for ln in text.split("\n"))


def _unescape(line: str) -> str:
    m = _ESCAPED.match(line)
    return line[1:] if m and m.group(1) else line


def section(header: str, body: str) -> str:
    """One section: its mark line, then ``body`` (escaped)."""
    return f"{SECTION_MARK} {header}\n{escape(body)}"


def summary_body(task: Sequence[str], text: str) -> str:
    """The task sections, then the summarizer's ``text``: under a ``Summary``
    header, closed by the end mark, when it is not in ARS's sections (a model's
    prose), so no reader takes it for the end of the last request."""
    if not task:
        return text
    if not text.strip():
        return "\n\n".join([*task, end_mark()])
    if not text.startswith(SECTION_MARK + " "):
        text = f"{section(SUMMARY_HEADER, text)}\n\n{end_mark()}"
    return "\n\n".join([*task, text])


def end_mark() -> str:
    """The line that closes an extractive summary."""
    return f"{SECTION_MARK} {END}"


def bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in lines)


def items(body: str) -> list[str]:
    """The ``- `` items of a section's body."""
    return [ln[2:] for ln in body.splitlines() if ln.startswith("- ")]


def one_line(text: str, limit: int) -> str:
    return clip(" ".join(text.split()), limit)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_summary(text: str) -> list[tuple[str, str]]:
    """The ``(header, body)`` sections of a summary ARS's extractive summarizer
    wrote, in order (text outside sections is ignored). A summary in ``## ``
    sections (an older ARS, or a model's markdown) is read by its headings;
    any other text yields ``[]``."""
    sections: list[tuple[str, list[str]]] = []
    ended = False
    for line in text.split("\n"):
        if line.startswith(SECTION_MARK + " "):
            header = line[len(SECTION_MARK) + 1 :].strip()
            if header == END:
                ended = True
                break
            sections.append((header, []))
        elif sections:
            sections[-1][1].append(_unescape(line))
    if not sections and not ended:
        return [(h, b) for h, b in _markdown_sections(text)[1] if h is not None]
    return [(h, "\n".join(body).strip("\n")) for h, body in sections]


def _markdown_sections(text: str) -> tuple[str, list[tuple[str | None, str]]]:
    """The text before the first ``## `` heading, and each heading with its body."""
    head: list[str] = []
    out: list[tuple[str | None, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            out.append((line[3:].strip(), []))
        elif out:
            out[-1][1].append(line)
        else:
            head.append(line)
    return "\n".join(head).strip(), [(h, "\n".join(body).strip()) for h, body in out]


@attrs.define
class Earlier:
    """What an earlier summary said, ready to merge into the next one.

    ``sections``: its ``(header, body)`` sections (ARS's own, or the ``## ``
    sections of a model's markdown), in order; ``free``: its text outside
    any section (a model's prose); ``archives``: ``(cutoff, path)`` of every
    archive file it names, oldest first (``cutoff`` the last message number
    the file holds, ``None`` when unknown); ``ars``: written by ARS's
    extractive summarizer (marked sections)."""

    sections: list[tuple[str, str]] = attrs.field(factory=list)
    free: str = ""
    archives: list[tuple[int | None, str]] = attrs.field(factory=list)
    ars: bool = False


def read_earlier(message: Message) -> Earlier:
    """Read an earlier summary message: ARS's frame (the covered range, a failure
    note, the archive sentence) and LangChain's opening line are taken off, the
    archive paths kept, and the body read as ARS's sections, ``## `` sections
    (with any text before the first heading as free text) or free text."""
    meta = message.metadata
    found = Earlier()
    lines = message.text.strip().split("\n")
    cutoff: int | None = None
    if lines and (opening := _OPENING.match(lines[0])):
        cutoff = int(opening.group(1)) if opening.group(1) else None
        lines = lines[1:]
    lines = [ln for ln in lines if not _FAILED.match(ln)]
    saved = _SAVED.match(lines[-1]) if lines else None
    if saved:
        lines = lines[:-1]
    path = meta.get("ars_history_path") or (saved.group(1) if saved else None)
    continues = meta.get("ars_history_continues") or (saved.group(2) if saved else None)
    if isinstance(meta.get("ars_cutoff"), int):
        cutoff = meta["ars_cutoff"]
    body = "\n".join(lines).strip()
    marked = SECTION_MARK + " " in body and any(
        ln.startswith(SECTION_MARK + " ") for ln in body.split("\n")
    )
    if marked:
        found.ars = True
        found.sections = []
        for header, text in parse_summary(body):
            if header != SUMMARY_HEADER:
                found.sections.append((header, text))
                continue
            # a model's text after the task ARS wrote: its prose and its own sections
            free, md = _markdown_sections(text)
            found.free = "\n\n".join(x for x in (found.free, free) if x)
            found.sections += [(h, b) for h, b in md if h is not None]
    else:
        found.free, md = _markdown_sections(body)
        found.sections = [(h, b) for h, b in md if h is not None]
    for header, text in found.sections:
        if header == ARCHIVES_HEADER:
            found.archives += [_archive_item(item) for item in items(text)]
    found.sections = [(h, b) for h, b in found.sections if h != ARCHIVES_HEADER]
    if continues and isinstance(continues, str):
        found.archives.append((None, continues))
    if path and isinstance(path, str):
        found.archives.append((cutoff, path))
    return found


_ARCHIVE_ITEM = re.compile(r"^messages (?:\d+-)?(\d+): (.+)$")


def _archive_item(item: str) -> tuple[int | None, str]:
    m = _ARCHIVE_ITEM.match(item)
    return (int(m.group(1)), m.group(2)) if m else (None, item)


#: archive files a summary names one by one: the first and the newest ones
NAMED_FIRST, NAMED_NEWEST = 1, 3
_MORE = re.compile(r"^(\d+) more files? in the same folder$")


def _files(path: str) -> int:
    """How many files an archive entry stands for (a collapsed entry says it)."""
    more = _MORE.match(path)
    return int(more.group(1)) if more else 1


def archives_section(archives: Sequence[tuple[int | None, str]]) -> str | None:
    """The section naming ``archives`` (each path once, oldest first), or ``None``
    when there are none. The first file and the newest ones are named; the files
    between are one entry with their range and count (their names hold their
    ranges: ``history-<start>-<end>-<hash>.jsonl`` in the same folder), so the
    section stays small however many rounds ran."""
    seen: dict[str, int | None] = {}
    for cutoff, path in archives:
        seen.pop(path, None)
        seen[path] = cutoff
    if not seen:
        return None
    entries = list(seen.items())
    if len(entries) > NAMED_FIRST + NAMED_NEWEST + 1:
        middle = entries[NAMED_FIRST:-NAMED_NEWEST]
        count = sum(_files(path) for path, _ in middle)
        merged = (f"{count} more files in the same folder", middle[-1][1])
        entries = [*entries[:NAMED_FIRST], merged, *entries[-NAMED_NEWEST:]]
    lines, start = [], 1
    for path, cutoff in entries:
        if cutoff is None:
            lines.append(path)
            continue
        lines.append(f"messages {start}-{cutoff}: {path}" if start <= cutoff else path)
        start = cutoff + 1
    return section(ARCHIVES_HEADER, bullets(lines))


#: what the marker in a shortened text says was left out
SHORTENED_TEXT = "characters shortened"
#: ... in a shortened request of the task: how much, and where the whole of it is
REQUEST_ELIDED = (
    "characters of this request left out here; the whole request is in the "
    "conversation history file"
)
#: ... in a request shortened to a tiny room (its head and tail, or nothing but this)
TEXT_LEFT_OUT = "characters left out"
#: metadata key of an omitted-messages note: the anchors of what it stands for
MARK_OMITTED = "ars_omitted"
#: files an omitted-messages note names at most
OMITTED_ITEMS = 20
#: fewest characters a shortened request keeps (head and tail)
MIN_REQUEST_CHARS = 80
#: characters the shortening note itself takes
NOTE_CHARS = 48


def shorten_text(text: str, max_chars: int, what: str = SHORTENED_TEXT) -> str:
    """``text`` cut to ``max_chars``: its head and tail around a marker saying how
    much was left out (``what``)."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 3 // 4
    tail = max_chars - head
    end = text[-tail:] if tail else ""
    return f"{text[:head]}\n[... {len(text) - max_chars} {what} ...]\n{end}"


def share_chars(text: str, share: int, size: int, note: int = NOTE_CHARS) -> int:
    """Characters of ``text`` (``size`` tokens) that fit ``share`` tokens, its shortening
    note (``note`` characters) included."""
    return max(MIN_REQUEST_CHARS, len(text) * share // max(size, 1) - note)


def fair_shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` over items of ``sizes``: small items whole, the large ones an
    equal share of what is left (water filling)."""
    shares = list(sizes)
    if sum(sizes) <= budget:
        return shares
    left, order = budget, sorted(range(len(sizes)), key=lambda i: sizes[i])
    for n, i in enumerate(order):
        share = left // (len(order) - n)
        shares[i] = min(sizes[i], share)
        left -= shares[i]
    return shares
