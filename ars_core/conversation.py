"""Extractive summaries of conversations: the sentences people ask about later.

A long chat is not a task with tool calls: what a user asks about later is
what either side said — names, dates and times, numbers, places, decisions,
commitments, preferences, changes of plan. :func:`conversation_section`
keeps the sentences of both speakers that carry most of those, per token,
deduplicated, in their order, grouped under the session dates the messages
carry, packed to a token budget. A section it wrote is read back by the next
summary (:func:`read_conversation`), whose sentences compete again with the
new ones, so chained summaries keep the best of the whole conversation.

:func:`is_conversation` tells a conversation (many user turns, few tool
calls) from an agent run; :class:`~ars_core.summarize.ExtractiveSummarizer`
uses it to pick its mode.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .estimate import Estimator
from .messages import Message
from .retention import is_earlier_summary, is_user_request
from .summary_text import SECTION_MARK, section

__all__ = [
    "CONVERSATION_HEADER",
    "Utterance",
    "conversation_section",
    "is_conversation",
    "read_conversation",
    "sentence_score",
    "utterances",
]

#: the header of the section of an extractive summary that keeps a conversation's sentences
CONVERSATION_HEADER = "Conversation (the sentences most likely to matter later, in order)"
#: fewest user requests that make a history a conversation (with fewer tool calls than them)
MIN_TURNS = 3
#: what a sentence already kept by an earlier summary is worth, against a new one
EARLIER_WEIGHT = 0.9
#: a sentence worth less than this (a greeting, a filler, a bare question) is never kept
MIN_SCORE = 0.15
#: what each content word a sentence adds to the summary is worth (see conversation_section)
NOVELTY = 0.5
#: how much a sentence's length counts against it: value = score / tokens ** LENGTH_WEIGHT
LENGTH_WEIGHT = 0.6

#: metadata keys that may hold a message's date (the first one set is used)
DATE_KEYS = ("date", "datetime", "timestamp", "created_at", "time", "session_date")


def is_conversation(messages: Sequence[Message]) -> bool:
    """A conversation: at least :data:`MIN_TURNS` user requests and fewer tool calls
    than user requests, or an earlier summary that kept a conversation. A
    one-task agent run (one or a few requests, then tool call after tool call)
    is not one."""
    requests = calls = 0
    for m in messages:
        if is_earlier_summary(m) and f"{SECTION_MARK} {CONVERSATION_HEADER}\n" in m.text:
            return True
        if is_user_request(m):
            requests += 1
        elif m.role == "assistant":
            calls += len(m.tool_calls)
    return requests >= MIN_TURNS and calls < requests


@attrs.frozen
class Utterance:
    """One sentence someone said: its session date ("" when unknown), speaker,
    text, the message it came from (``turn``: sentences of one turn share a
    line) and whether an earlier summary had already kept it."""

    date: str
    speaker: str
    text: str
    turn: int
    earlier: bool = False


# ------------------------------------------------------------------ reading messages

# a line of a transcript: "[<date>] <Name>: <text>" (the date optional when a name follows)
_DATED = re.compile(r"^\[([^\]\n]{3,60})\]\s*(?:([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s+)?")
_SHORTENED = re.compile(r"^\[\.\.\. \d+ characters shortened \.\.\.\]$")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=\S)|\n+")
_SPEAKER_CHARS = re.compile(r"[^\w .'-]")


def _clean_speaker(name: str) -> str:
    return _SPEAKER_CHARS.sub("", name).strip()[:40]


def _speaker(m: Message) -> str:
    if m.name:
        return _clean_speaker(m.name) or m.role.capitalize()
    return "User" if m.role == "user" else "Assistant"


def _metadata_date(meta: Mapping[str, Any]) -> str:
    for key in DATE_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())[:60]
    return ""


#: a sentence longer than this many words is kept in pieces of :data:`PIECE_WORDS`
LONG_SENTENCE_WORDS = 50
PIECE_WORDS = 40


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (and lines), each on one line; a run of words
    longer than :data:`LONG_SENTENCE_WORDS` in pieces of :data:`PIECE_WORDS`."""
    out: list[str] = []
    for part in _SENTENCE_END.split(text):
        words = part.split()
        if len(words) <= LONG_SENTENCE_WORDS:
            out += [" ".join(words)] if words else []
        else:
            out += [" ".join(words[i : i + PIECE_WORDS]) for i in range(0, len(words), PIECE_WORDS)]
    return out


def utterances(
    messages: Iterable[Message], *, skip: Iterable[str] = (), first_turn: int = 0
) -> list[Utterance]:
    """The sentences of the user requests and assistant replies in ``messages``, in
    order (texts in ``skip`` left out: they are kept whole elsewhere). A
    transcript line ``[<date>] <Name>: <text>`` gives its date and speaker;
    otherwise the message's date metadata and its name or role do."""
    skipped = {s.strip() for s in skip}
    out: list[Utterance] = []
    turn = first_turn
    for m in messages:
        if m.role == "assistant":
            if not m.text.strip():
                continue
        elif not is_user_request(m):
            continue
        if m.text.strip() in skipped:
            continue
        turn += 1
        date, speaker = _metadata_date(m.metadata), _speaker(m)
        for line in m.text.split("\n"):
            if _SHORTENED.match(line):  # the summary input's note where a message was cut
                continue
            dated = _DATED.match(line)
            line_speaker = speaker
            if dated and _is_date(dated.group(1)):
                date = " ".join(dated.group(1).split())
                line_speaker = _clean_speaker(dated.group(2) or "") or speaker
                line = line[dated.end() :]
            out += [Utterance(date, line_speaker, s, turn) for s in sentences(line)]
    return out


_DATE_LINE = re.compile(r"^\[([^\]\n]{1,60})\]$")
_SPOKEN = re.compile(r"^([^:\n]{1,40}): (.*)$")


def read_conversation(body: str) -> list[Utterance]:
    """The sentences of a conversation section this module wrote, in order, marked
    as kept by an earlier summary."""
    out: list[Utterance] = []
    date, turn = "", 0
    for line in body.split("\n"):
        if not line.strip():
            continue
        if m := _DATE_LINE.match(line):
            date = m.group(1)
            continue
        spoken = _SPOKEN.match(line)
        speaker, text = (spoken.group(1), spoken.group(2)) if spoken else ("", line)
        turn -= 1  # earlier turns count down: never the same as a new message's
        out += [Utterance(date, speaker, s, turn, earlier=True) for s in sentences(text)]
    return out


# ------------------------------------------------------------------ what a sentence is worth

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_WHEN = re.compile(
    rf"\b(?:{_MONTHS}|{_DAYS}|yesterday|today|tonight|tomorrow|weekend|ago"
    r"|last (?:week|month|year|night|summer|winter|spring|fall)"
    r"|next (?:week|month|year|summer|winter|spring|fall)|this (?:week|month|year|weekend)"
    r"|(?:19|20)\d\d|\d{1,2}(?::\d\d)?\s?(?:am|pm)|\d{1,2}:\d\d|birthday|anniversary)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"\b(?:\d[\d,.]*%?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
    r"|twenty|thirty|forty|fifty|hundred|thousand|million|dozen|first|second|third)\b",
    re.IGNORECASE,
)
_DECIDED = re.compile(
    r"\b(?:decided?|decision|plan(?:s|ned|ning)?|going to|gonna|will|'ll|promise[ds]?|agreed?"
    r"|let's|schedul\w*|book(?:ed)?|sign(?:ed)? up|start(?:ed|ing)?|join(?:ed)?|bought|buy"
    r"|moved?|adopt(?:ed)?|finish(?:ed)?|won|lost|visit(?:ed)?|went|trip|travel\w*|got"
    r"|instead|chang(?:ed?|ing)|cancel\w*|postpon\w*|switch(?:ed)?|no longer|anymore"
    r"|reschedul\w*|quit|must|need to|deadline|due)\b",
    re.IGNORECASE,
)
_LIKES = re.compile(
    r"\b(?:love[ds]?|like[ds]?|favou?rite|prefer\w*|enjoy\w*|hate[ds]?|passion\w*|fan of"
    r"|hobby|hobbies|dream|into|interested|allergic|vegetarian|vegan)\b",
    re.IGNORECASE,
)
_OWN = re.compile(
    r"\b(?:my (?:\w+ )?(?:wife|husband|partner|son|daughter|kids?|children|mom|mother|dad|father"
    r"|sister|brother|friend|family|dog|cat|pet|job|boss|team|house|home|car|name)"
    r"|i'm (?:a|an)|i am (?:a|an)|i work|i live|i have|i've been|i was born)\b",
    re.IGNORECASE,
)
_FILLER = re.compile(
    r"^(?:hey|hi|hello|thanks|thank you|wow|awesome|great|cool|nice|congrat\w*|bye|take care"
    r"|good to|that's (?:great|awesome|amazing|cool|so|really|wonderful)|sounds|haha|lol|omg"
    r"|oh|aw+|yeah|yes|no|sure|ok(?:ay)?|glad|sorry)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z][\w'-]*|\d[\d,.:]*")
_NOT_NAMES = frozenset(
    "I I'm I've I'd I'll Im OK Ok Oh Hey Hi Hello Yes No Wow Thanks Thank Sure Yeah Well So"
    " And But Or The A An It It's That's This That What When Where Who Why How Do Did Does"
    " Is Are Was Were Can Could Would Should Will Have Has Had My Your Our Their We You He She"
    " They Me Let Let's Just Also Not Maybe Please Good Great".split()
)


_NUMERIC_DATE = re.compile(r"\d{1,4}[-/.]\d{1,2}")


def _is_date(text: str) -> bool:
    """``text`` (in square brackets at the start of a line) names a date or a time."""
    return bool(_WHEN.search(text) or _NUMERIC_DATE.search(text))


@functools.lru_cache(maxsize=8192)
def sentence_score(text: str) -> float:
    """What ``text`` is worth to someone asking about the conversation later: names
    and places, dates and times, numbers, decisions and commitments, preferences,
    facts about the speaker; fillers, greetings and questions are worth less."""
    words = _WORD.findall(text)
    if not words:
        return 0.0
    names = sum(1 for w in words[1:] if w[0].isupper() and w not in _NOT_NAMES)
    score = 0.2
    score += min(names, 3) * 1.0
    score += min(len(_WHEN.findall(text)), 2) * 1.5
    score += min(len(_NUMBER.findall(text)), 2) * 0.8
    score += min(len(_DECIDED.findall(text)), 2) * 0.7
    score += min(len(_LIKES.findall(text)), 2) * 0.8
    score += min(len(_OWN.findall(text)), 2) * 0.6
    if _FILLER.match(text):  # a greeting or a reaction: names in it are the addressee's
        score = min(score, 0.1) if len(words) < 6 else score * 0.4
    elif len(words) < 4:
        score *= 0.3
    if text.rstrip().endswith("?"):
        score *= 0.3
    return score


def _key(text: str) -> str:
    """What two sentences that say the same thing share (case, punctuation and
    word order aside)."""
    return " ".join(sorted(set(w.lower() for w in _WORD.findall(text))))


# ------------------------------------------------------------------ the section


def conversation_section(said: Sequence[Utterance], room: int, estimator: Estimator) -> str | None:
    """The conversation section: the sentences of ``said`` worth most per token,
    each said once, in order, grouped by date and turn, within ``room`` tokens
    (``None`` when nothing fits). A sentence is worth its :func:`sentence_score`
    plus :data:`NOVELTY` for each content word no sentence kept before it has
    (what a summary adds, not what it repeats); picked greedily by worth per
    token, the worth of the others updated as words are covered (lazily: it
    only falls)."""
    unique: dict[str, int] = {}
    for i, u in enumerate(said):
        if sentence_score(u.text) >= MIN_SCORE:
            unique.setdefault(_key(u.text), i)
    sizes = {i: estimator.count_text(said[i].text) + 1 for i in unique.values()}
    words = {i: _content_words(said[i].text) for i in sizes}
    covered: set[str] = set()

    def value(i: int) -> float:
        u = said[i]
        weight = EARLIER_WEIGHT if u.earlier else 1.0
        worth = sentence_score(u.text) + NOVELTY * len(words[i] - covered)
        return float(worth * weight / max(sizes[i], 1) ** LENGTH_WEIGHT)

    header = estimator.count_text(section(CONVERSATION_HEADER, "")) + 2
    left = room - header
    chosen: set[int] = set()
    dates: set[str] = set()
    turns: set[int] = set()
    heap = [(-value(i), -i) for i in sizes]
    heapq.heapify(heap)
    while heap:
        _, neg = heapq.heappop(heap)
        i = -neg
        current = value(i)
        if heap and current < -heap[0][0]:  # worth less now: back in line
            heapq.heappush(heap, (-current, neg))
            continue
        u = said[i]
        cost = sizes[i]
        if u.turn not in turns:
            cost += estimator.count_text(f"{u.speaker}: ") + 1
        if u.date and u.date not in dates:
            cost += estimator.count_text(f"[{u.date}]") + 1
        if cost > left:
            continue
        left -= cost
        chosen.add(i)
        covered |= words[i]
        turns.add(u.turn)
        if u.date:
            dates.add(u.date)
    while chosen:
        text = section(CONVERSATION_HEADER, _render([said[i] for i in sorted(chosen)]))
        if estimator.count_text(text) <= room:
            return text
        chosen.discard(min(chosen, key=value))  # the estimate of the frame was short
    return None


_COMMON = frozenset(
    "the and for that this with you your have has had was were are but not just what when"
    " where who why how all any can could would should will been being from they them their"
    " there then than its it's i'm i've i'll i'd you're that's about into out our ours his her"
    " she him he's she's we we're also some more most very really so too much many well yeah"
    " yes okay sure thanks thank one get got did does doing done make made like know think"
    " going go went see saw say said want way lot things thing time good great"
    " awesome amazing cool nice love".split()
)


def _content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that carry content (three letters or more, not common)."""
    return frozenset(
        w for w in (x.lower() for x in _WORD.findall(text)) if len(w) >= 3 and w not in _COMMON
    )


def _render(kept: Sequence[Utterance]) -> str:
    lines: list[str] = []
    date, turn = "", None
    for u in kept:
        if u.date and u.date != date:
            date, turn = u.date, None
            lines.append(f"[{u.date}]")
        if u.turn == turn:
            lines[-1] += " " + u.text
        else:
            turn = u.turn
            lines.append(f"{u.speaker}: {u.text}" if u.speaker else u.text)
    return "\n".join(lines)
