"""L. Multi-session chat: what each policy keeps of a long conversation.

Long multi-session conversations (LoCoMo's format: two speakers, dated sessions,
question-answer items about facts said in them) replayed naturally: the first
speaker is the user, the second the assistant, consecutive turns of one speaker
joined into one message, each turn prefixed with its session's date and its
speaker; one model request per user message. At the final request, a QA item
is found when its answer text occurs in the request (case-insensitive; items
without an answer, LoCoMo's adversarial category, are not counted).

Policies: no limit, LangChain ``trim_messages(strategy="last")`` (the newest
messages that fit T, no summary), LangChain's and deepagents'
``SummarizationMiddleware`` (trigger T, keep), ARS with its defaults and ARS with
``lean_rounds=False``; every summarizing policy uses the same built-in
extractive summarizer, metered as in B. The data set is not shipped (CC BY-NC,
measurement only): without it the section says so and measures nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ars_core import Message
from ars_core.replay import Run

from .common import LC, REPO, Context, table, target
from .tokens import O200k, TokenStats, tokens_ars, tokens_deepagents, tokens_langchain

KEY = "L"
NEEDS: tuple[str, ...] = ()

#: where the development conversations are looked for when ``--chat-data`` is not given
DEFAULT_CHAT_DATA = REPO.parent / "shared" / "data" / "chat" / "locomo-dev.json"

POLICIES = (
    "no limit",
    "LangChain trim_messages (last)",
    "LangChain SummarizationMiddleware",
    "deepagents SummarizationMiddleware",
    "ARS",
    "ARS, lean_rounds=False",
)
TRIM, ARS, ARS_FIXED = POLICIES[1], POLICIES[4], POLICIES[5]
#: points ARS must find above ``trim_messages``
MARGIN = 5.0


@dataclass
class Chat:
    """One conversation as a replayable run, and its answerable QA items."""

    name: str
    messages: list[Message]
    answers: list[str]  # the answer text of every item that has one


def _turn_text(turn: dict[str, Any], date: str) -> str:
    return f"[{date}] {turn['speaker']}: {turn['text']}"


def chat_messages(name: str, conversation: dict[str, Any]) -> list[Message]:
    """The natural replay of one LoCoMo conversation (see the module doc)."""
    user = conversation["speaker_a"]
    numbers = sorted(
        int(key.removeprefix("session_"))
        for key, value in conversation.items()
        if key.startswith("session_") and isinstance(value, list)
    )
    joined: list[tuple[str, list[str]]] = []
    for n in numbers:
        date = conversation.get(f"session_{n}_date_time", "")
        for turn in conversation[f"session_{n}"]:
            role = "user" if turn["speaker"] == user else "assistant"
            if joined and joined[-1][0] == role:
                joined[-1][1].append(_turn_text(turn, date))
            else:
                joined.append((role, [_turn_text(turn, date)]))
    return [
        Message(role=role, content="\n".join(texts), id=f"{name}-{i}")
        for i, (role, texts) in enumerate(joined)
    ]


def load_chats(path: Path) -> list[Chat]:
    """The conversations of a LoCoMo-format file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        Chat(
            name=item.get("sample_id", f"chat-{i}"),
            messages=chat_messages(item.get("sample_id", f"chat-{i}"), item["conversation"]),
            answers=[str(qa["answer"]) for qa in item["qa"] if qa.get("answer") is not None],
        )
        for i, item in enumerate(data)
    ]


def as_run(chat: Chat) -> Run:
    """The chat as a recorded run whose every user message gets a request: a closing
    reply is added when the chat ends with the user's message (it is never sent)."""
    messages = list(chat.messages)
    if messages and messages[-1].role == "user":
        messages.append(Message(role="assistant", content="(end)", id=f"{chat.name}-end"))
    return Run(name=chat.name, source="chat", messages=tuple(messages))


@dataclass
class ChatStats:
    """One policy over the chats at one T."""

    answers: int = 0  # answerable items
    found: int = 0  # found in the final request
    found_anywhere: int = 0  # ... of those the whole chat holds
    fewest_kept: int | None = None  # fewest verbatim messages in a request right after a summary
    rounds: int = 0
    summary_tokens: int = 0
    sent: int = 0
    requests: int = 0
    over: int = 0

    @property
    def share(self) -> float:
        return 100 * self.found / self.answers if self.answers else 0.0

    def keep_seen(self, kept: int) -> None:
        self.fewest_kept = kept if self.fewest_kept is None else min(self.fewest_kept, kept)


class _Probe(O200k):
    """o200k counting that keeps the last request and, on every request a summary round
    produced, how many of the chat's messages it holds verbatim."""

    def __init__(self, base: O200k, chat: Chat, tokens: TokenStats, out: ChatStats) -> None:
        self.est = base.est
        self._texts = {m.text for m in chat.messages}
        self._tokens, self._out = tokens, out
        self._summaries = 0
        self.last: list[Message] = []

    def request(self, system: Message | None, view: Iterable[Message]) -> int:
        self.last = list(view)
        if self._tokens.summaries != self._summaries:
            self._summaries = self._tokens.summaries
            self._out.keep_seen(sum(m.text in self._texts for m in self.last))
        return super().request(system, self.last)


def _trim(chat: Chat, threshold: int, o200k: O200k, stats: TokenStats, lc: LC) -> None:
    from langchain_core.messages import trim_messages

    def count(messages: list[Any]) -> int:
        return o200k.request(None, [lc.to_core(m) for m in messages])

    history: list[Any] = []
    for m in as_run(chat).messages:
        if m.role == "assistant":
            view = trim_messages(
                history, max_tokens=threshold, token_counter=count, strategy="last"
            )
            stats.add_request(o200k.request(None, [lc.to_core(x) for x in view]), threshold)
        history.append(lc.from_core(m))


def _none(chat: Chat, threshold: int, o200k: O200k, stats: TokenStats) -> None:
    history = list(as_run(chat).messages)
    for i, m in enumerate(history):
        if m.role == "assistant":
            stats.add_request(o200k.request(None, history[:i]), threshold)


def replay_chat(
    name: str, chat: Chat, k: float, keep: int, o200k: O200k, lc: LC, root: Path
) -> tuple[ChatStats, list[Message]]:
    """Policy ``name`` over ``chat`` at ``k`` K tokens: its stats and its final request."""
    threshold = int(k * 1024)
    out, tokens = ChatStats(), TokenStats()
    probe = _Probe(o200k, chat, tokens, out)
    run = as_run(chat)
    if name == "no limit":
        _none(chat, threshold, probe, tokens)
    elif name == TRIM:
        _trim(chat, threshold, probe, tokens, lc)
    elif name == ARS:
        tokens_ars(run, k, probe, tokens, keep)
    elif name == ARS_FIXED:
        tokens_ars(run, k, probe, tokens, keep, options={"lean_rounds": False})
    elif name.startswith("LangChain"):
        tokens_langchain(run, threshold, probe, tokens, keep, lc)
    else:
        tokens_deepagents(run, threshold, probe, tokens, keep, lc, root)
    out.rounds, out.sent = tokens.summaries, tokens.total
    out.requests, out.over = tokens.requests, tokens.over
    out.summary_tokens = tokens.summary_in + tokens.summary_out
    return out, probe.last


def _found(answers: Sequence[str], view: Sequence[Message]) -> list[bool]:
    text = "\n".join(m.text for m in view).lower()
    return [a.lower() in text for a in answers]


def _add(total: ChatStats, one: ChatStats, found: list[bool], anywhere: list[bool]) -> None:
    total.answers += len(found)
    total.found += sum(found)
    total.found_anywhere += sum(f and a for f, a in zip(found, anywhere, strict=True))
    if one.fewest_kept is not None:
        total.keep_seen(one.fewest_kept)
    total.rounds += one.rounds
    total.summary_tokens += one.summary_tokens
    total.sent += one.sent
    total.requests += one.requests
    total.over += one.over


def chat_path(ctx: Context) -> Path | None:
    """The chat data set to measure: ``--chat-data``, else the default location
    (not in quick mode: the smoke run never depends on data outside the clone)."""
    given = getattr(ctx.args, "chat_data", None)
    if given is not None:
        return Path(given)
    return None if ctx.args.quick else DEFAULT_CHAT_DATA


def measure(ctx: Context) -> dict[str, Any]:
    path = chat_path(ctx)
    if path is None or not path.is_file():
        reason = (
            "quick mode: pass --chat-data to measure it"
            if path is None
            else f"the chat data set is not at {path} (it is not shipped: CC BY-NC, "
            "measurement only; pass --chat-data)"
        )
        ctx.log(f"  skipped: {reason}")
        return {"skipped": reason}
    chats = load_chats(path)
    thresholds = [float(s) for s in ctx.args.chat_thresholds.split(",") if s.strip()]
    keep, o200k, lc = ctx.args.keep, O200k(), LC()
    result: dict[float, dict[str, ChatStats]] = {}
    for k in thresholds:
        row = result[k] = {name: ChatStats() for name in POLICIES}
        for i, chat in enumerate(chats):
            anywhere = _found(chat.answers, chat.messages)
            for j, name in enumerate(POLICIES):
                root = ctx.tmp / f"chat-{k}-{i}-{j}"
                one, last = replay_chat(name, chat, k, keep, o200k, lc, root)
                _add(row[name], one, _found(chat.answers, last), anywhere)
        ctx.log(f"  at {k:g}K: " + ", ".join(f"{n} {s.share:.1f}%" for n, s in row.items()))
    return {
        "thresholds": thresholds,
        "table": result,
        "chats": [c.name for c in chats],
        "source": path.name,
        "keep": keep,
    }


HEADER = [
    "T (tokens)",
    "policy",
    "answers in the final request",
    "of those in the chat",
    "fewest kept after a summary",
    "summary rounds",
    "summary-call tokens",
    "tokens sent",
    "requests over T",
]


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## L. Multi-session chat: answers kept in the final request", ""]
    if "skipped" in data:
        return [*lines, f"Skipped: {data['skipped']}.", ""]
    lines.append(
        f"{len(data['chats'])} conversations of `{data['source']}` ({', '.join(data['chats'])}); "
        "the first speaker is the user, consecutive turns of one speaker joined, each turn "
        "prefixed with its session date and speaker, one request per user message; keep "
        f"{data['keep']}. An item is found when its answer text is in the final request "
        '(case-insensitive; % of the items with an answer); "of those in the chat": % of the '
        'items whose answer the whole chat holds. "fewest kept": the fewest of the chat\'s '
        "messages a request right after a summary round holds verbatim. Every summarizing "
        "policy uses the built-in extractive summarizer; tokens counted with o200k."
    )
    lines.append("")
    rows = []
    for k in data["thresholds"]:
        none = data["table"][k]["no limit"]
        for name in POLICIES:
            s = data["table"][k][name]
            rows.append(
                [
                    f"{int(k * 1024):,}",
                    name,
                    f"{s.share:.1f}%",
                    f"{100 * s.found_anywhere / none.found:.1f}%" if none.found else "-",
                    "-" if s.fewest_kept is None else f"{s.fewest_kept:,}",
                    f"{s.rounds:,}",
                    f"{s.summary_tokens:,}",
                    f"{s.sent:,}",
                    f"{s.over:,}",
                ]
            )
    lines += [*table(HEADER, rows, "rlrrrrrrr"), ""]
    for k in data["thresholds"]:
        row = data["table"][k]
        ars, trim, fixed = row[ARS], row[TRIM], row[ARS_FIXED]
        at = f"at T={int(k * 1024):,}"
        lines.append(
            target(
                f"{at}, ARS finds at least trim_messages + {MARGIN:g} points "
                f"({ars.share:.1f}% against {trim.share:.1f}%)",
                ars.share >= trim.share + MARGIN,
            )
        )
        fewest = ars.fewest_kept
        lines.append(
            target(
                f"{at}, ARS keeps at least {data['keep']} messages verbatim after every summary "
                f"(fewest {'-' if fewest is None else fewest})",
                fewest is None or fewest >= data["keep"],
            )
        )
        lines.append(
            target(
                f"{at}, ARS's summary rounds are no more than with lean_rounds=False "
                f"({ars.rounds} against {fixed.rounds})",
                ars.rounds <= fixed.rounds,
            )
        )
    lines.append("")
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    if "skipped" in data:
        return {"chat": {"skipped": data["skipped"]}}
    return {
        "chat": {
            f"{k:g}": {name: {**vars(s), "share": round(s.share, 2)} for name, s in row.items()}
            for k, row in data["table"].items()
        }
    }
