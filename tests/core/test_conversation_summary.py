"""The extractive summarizer serves conversations (R60): both speakers' facts —
names, dates, numbers, decisions, preferences, changes of plan — kept in order
under their session dates, fillers left out, within the budget; a chained
summary lets the earlier sentences compete with the new ones. An agent run
keeps the agent layout.
"""

from __future__ import annotations

import pytest

from ars_core import Compressor, ConfigError, FsspecBackend, Message, SummaryConfig
from ars_core.conversation import CONVERSATION_HEADER, is_conversation, read_conversation
from ars_core.estimate import ApproxEstimator
from ars_core.l2 import build_summary_message
from ars_core.summarize import ExtractiveSummarizer, parse_summary
from ars_core.testing import ScriptedModel

from .helpers import assistant, call, tool, user, words

EST = ApproxEstimator()
PROMPT = "{messages}"

CHAT = [
    user("[8 May, 2023] Ana: Hey Ben! Good to see you! How have you been?"),
    assistant("[8 May, 2023] Ben: Hi Ana! Busy as always. What's new with you?"),
    user("[8 May, 2023] Ana: I adopted a dog named Pixel last Saturday. She is three years old."),
    assistant(
        "[8 May, 2023] Ben: Wow, that's great! I'm moving to Lisbon on 1 June for a job at Feedzai."
    ),
    user("[8 May, 2023] Ana: That's awesome! Congrats!"),
    assistant("[8 May, 2023] Ben: Thanks! Talk soon."),
    user(
        "[20 May, 2023] Ana: Hi Ben! I decided to run the Porto half marathon in October "
        "instead of the Berlin one."
    ),
    assistant(
        "[20 May, 2023] Ben: Nice! My favourite snack before a race is a banana with peanut butter."
    ),
    user("[20 May, 2023] Ana: Cool. Did you book your flight yet?"),
    assistant("[20 May, 2023] Ben: Yes, I booked it for 31 May at 7:40 am, seat 14C."),
]

#: what the first summary of CHAT keeps of the conversation (200 tokens)
FIRST_ROUND_FACTS = (
    "[8 May, 2023]\n"
    "Ana: I adopted a dog named Pixel last Saturday. She is three years old.\n"
    "Ben: I'm moving to Lisbon on 1 June for a job at Feedzai.\n"
    "[20 May, 2023]\n"
    "Ana: I decided to run the Porto half marathon in October instead of the Berlin one.\n"
    "Ben: My favourite snack before a race is a banana with peanut butter.\n"
    "Ben: Yes, I booked it for 31 May at 7:40 am, seat 14C.\n"
)

TASK = (
    "⟦ARS⟧ Task, user request 1 of 2\n"
    "[8 May, 2023] Ana: Hey Ben! Good to see you! How have you been?\n\n"
    "⟦ARS⟧ Task, user request 2 of 2\n"
)


@pytest.mark.spec("R60", "R23")
def test_a_chat_summary_keeps_both_speakers_facts_in_order_within_budget() -> None:
    """The greetings, fillers and bare questions go; each speaker's names, dates,
    numbers, decisions and preferences stay, under their session dates."""
    text = ExtractiveSummarizer(summary_tokens=200).summarize(CHAT, PROMPT).text
    assert text == (
        TASK + "[20 May, 2023] Ana: Cool. Did you book your flight yet?\n\n"
        f"⟦ARS⟧ {CONVERSATION_HEADER}\n" + FIRST_ROUND_FACTS + "\n⟦ARS⟧ end of summary"
    )
    assert EST.count_text(text) <= 200


@pytest.mark.spec("R60")
def test_a_smaller_budget_keeps_the_facts_worth_most_per_token() -> None:
    text = ExtractiveSummarizer(summary_tokens=150).summarize(CHAT, PROMPT).text
    kept = dict(parse_summary(text))[CONVERSATION_HEADER]
    assert kept == (
        "[8 May, 2023]\n"
        "Ana: I adopted a dog named Pixel last Saturday.\n"
        "[20 May, 2023]\n"
        "Ana: I decided to run the Porto half marathon in October instead of the Berlin one.\n"
        "Ben: My favourite snack before a race is a banana with peanut butter."
    )
    assert EST.count_text(text) <= 150


@pytest.mark.spec("R60", "R25")
def test_a_chained_chat_summary_merges_the_earlier_sentences_with_the_new_ones() -> None:
    first = ExtractiveSummarizer(summary_tokens=200).summarize(CHAT, PROMPT).text
    more = [
        user("[2 June, 2023] Ana: How is Lisbon? Did you find a flat?"),
        assistant(
            "[2 June, 2023] Ben: Lisbon is lovely. I rented a flat in Alfama for 1,200 euros "
            "a month."
        ),
        user(
            "[2 June, 2023] Ana: Pixel learned to sit! Also, I switched my race to the Lisbon "
            "half marathon so I can visit you."
        ),
        assistant("[2 June, 2023] Ben: Great, see you in October!"),
    ]
    earlier = build_summary_message(first, cutoff=10, file_path=None)
    text = ExtractiveSummarizer(summary_tokens=260).summarize([earlier, *more], PROMPT).text
    assert text == (
        TASK + "[2 June, 2023] Ana: Pixel learned to sit! Also, I switched my race to the "
        "Lisbon half marathon so I can visit you.\n\n"
        f"⟦ARS⟧ {CONVERSATION_HEADER}\n" + FIRST_ROUND_FACTS + "[2 June, 2023]\n"
        "Ben: I rented a flat in Alfama for 1,200 euros a month.\n"
        "Ana: Pixel learned to sit! Also, I switched my race to the Lisbon half marathon so I "
        "can visit you.\n\n"
        "⟦ARS⟧ end of summary"
    )
    assert EST.count_text(text) <= 260
    said = read_conversation(dict(parse_summary(text))[CONVERSATION_HEADER])
    assert [(u.date, u.speaker) for u in said][:2] == [("8 May, 2023", "Ana")] * 2


@pytest.mark.spec("R60")
def test_an_agent_run_keeps_the_agent_layout() -> None:
    """Requests followed by tool calls are a task, not a chat: no conversation section;
    ``mode="agent"`` asks for the agent layout on a chat too."""
    steps = []
    for i in range(3):
        c1, c2 = (
            call("bash", f"a{i}", command=f"pytest -k t{i}"),
            call("bash", f"b{i}", command="ls"),
        )
        steps += [user(f"request {i}"), assistant("", c1), tool(c1, "ok"), assistant("", c2)]
        steps += [tool(c2, "ok"), assistant(f"done {i}")]
    assert not is_conversation(steps) and is_conversation(CHAT)
    agent = [h for h, _ in parse_summary(ExtractiveSummarizer().summarize(steps, PROMPT).text)]
    assert agent == [
        "Task, user request 1 of 3",
        "Task, user request 2 of 3",
        "Task, user request 3 of 3",
        "Tool calls (latest)",
        "Latest conclusions",
    ]
    forced = ExtractiveSummarizer(mode="agent").summarize(CHAT, PROMPT).text
    assert CONVERSATION_HEADER not in forced and "Task, user request 5 of 5" in forced
    chat = ExtractiveSummarizer(mode="conversation").summarize(steps, PROMPT).text
    assert [h for h, _ in parse_summary(chat)] == [
        "Task, user request 1 of 2",
        "Task, user request 2 of 2",
        "Tool calls (latest)",
        CONVERSATION_HEADER,
    ]
    with pytest.raises(ConfigError, match="mode"):
        ExtractiveSummarizer(mode="chat")


@pytest.mark.spec("R60", "R23")
def test_the_engines_default_summary_of_a_chat_keeps_what_both_speakers_said() -> None:
    """A chat larger than T through the engine with no summarizer set: the summary
    message keeps the facts of both speakers, in order, and fits its budget."""
    chat: list[Message] = []
    for day in range(1, 13):
        date = f"[{day} March, 2024]"
        chat += [
            user(f"{date} Ana: Haha, " + words(40, "ana")),
            user(f"{date} Ana: On day {day} I paid {day * 10} euros for lesson {day} in Porto."),
            assistant(f"{date} Ben: Oh, " + words(40, "ben")),
            assistant(f"{date} Ben: I will meet Carla at {day + 1} pm on Friday, table {day}."),
        ]
    chat.append(user("[13 March, 2024] Ana: What did I pay on day 2?"))
    # T = 2K: the summary shares the room under the L2 threshold with the 4 kept messages
    config = SummaryConfig(summary_threshold=2, summary_keep_messages=4)
    out = Compressor(config, backend=FsspecBackend("memory://chat")).call(chat, ScriptedModel())
    assert out.level == "L2" and out.update is not None and out.update.event is not None
    summary = out.update.event.summary_message
    kept = dict(parse_summary(summary.text.split("\n\n", 1)[1]))[CONVERSATION_HEADER]
    lines = kept.split("\n")
    paid = [ln for ln in lines if "euros for lesson" in ln]
    meet = [ln for ln in lines if "meet Carla" in ln]
    assert paid and meet
    assert all(ln.startswith("Ana: On day") for ln in paid)
    assert all(ln.startswith("Ben: I will meet Carla at") for ln in meet)
    assert not any("context window" in ln for ln in lines)  # the fillers went
    order = [ln for ln in lines if ln.startswith("[")]
    assert order == sorted(order, key=lambda d: int(d[1:].split()[0]))  # dates in order
    assert EST.count_text(summary.text) <= config.summary_token_limit + 64
