"""A middleware that served every earlier call of a thread behaves exactly as a fresh
one given the thread as a checkpointer gives it back.

The warm middleware keeps its session (engine, converter, cached event) and is
handed the agent's own message objects call after call, as within one run. The
fresh one is a new middleware for every call, handed new LangChain messages
deserialized from the history's dicts and the state's event read back from JSON, as
a worker that loads the thread from its checkpointer is. Between calls the state is
edited the way agents and users edit it: turns appended (tool results large enough
for L1 to offload), a user message, a call left unanswered, the model's stamped
reply appended, the provider's usage reported, one or several messages removed, a
message replaced by id, every message made anew. At each call both must send the
model the same request and ask for the same state update, and write the same files.
What a worker keeps for a thread by design is given to the fresh middleware too: the
archive log (a later round writes a continuation naming the earlier archive) and what
the estimator learned from the provider's reported usage (its scale and margin).

``ARS_WARM_EXAMPLES`` raises the example count for a local hunt."""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.runnables.config import var_child_runnable_config

from ars_core import FsspecBackend, SummaryConfig
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.middleware import EVENT_KEY
from ars_langchain.sessions import model_window, scope_parts
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.core.helpers import files_in, words
from tests.warm_fresh import adapter_config, adapter_hunt, cleared

pytestmark = pytest.mark.spec("R4", "R10", "R12", "R24", "R44", "R51", "R58")

OPS = (
    "turn",
    "turn",
    "turn_big",
    "user",
    "unanswered",
    "reply",
    "usage",
    "remove",
    "remove_some",
    "replace",
    "renew",
    "overflow",
    "system",
)

#: what the model is told before the history, changed by the "system" edit
SYSTEMS = ("You are a careful coding agent.", "You are a terse reviewer. " + words(40, seed="s"))

Step = tuple[str, int, int]

#: a call of the "overflow" kind is refused while its request holds more messages
OVERFLOW_ABOVE = 6


class Agent:
    """The messages an agent's turns add: ids and texts new with each serial."""

    def turn(self, serial: int, big: bool) -> list[BaseMessage]:
        call = tool_call("bash", {"command": f"make step{serial}"}, f"c{serial}")
        output = words(2500 if big else 60, seed=f"o{serial}")
        return [
            HumanMessage(f"request {serial}: " + words(25, seed=f"r{serial}"), id=f"u{serial}"),
            AIMessage("", id=f"a{serial}", tool_calls=[call]),
            ToolMessage(f"output {serial}: {output}", tool_call_id=f"c{serial}", id=f"t{serial}"),
            AIMessage(f"answer {serial}: " + words(20, seed=f"n{serial}"), id=f"r{serial}"),
        ]


def apply(history: list[BaseMessage], step: Step, serial: int, reply: BaseMessage | None) -> str:
    """Edit ``history`` by ``step``; what the next call does otherwise ("usage": the
    provider reports its count; "overflow": a request of more than a few messages is
    refused as a context overflow; "system": another system message), else ""."""
    op, a, b = step
    n = len(history)
    if op in ("turn", "turn_big"):
        history.extend(Agent().turn(serial, op == "turn_big"))
    elif op == "user":
        history.append(HumanMessage("and also: " + words(12, seed=f"x{serial}"), id=f"x{serial}"))
    elif op == "unanswered":
        call = tool_call("read_file", {"path": f"src/f{serial}.py"}, f"open{serial}")
        history.append(AIMessage("", id=f"open-ai{serial}", tool_calls=[call]))
    elif op == "reply" and reply is not None:
        history.append(reply)
    elif op in ("usage", "overflow", "system"):
        return op
    elif op == "remove" and n:
        del history[a % n]
    elif op == "remove_some" and n:
        start = a % n
        del history[start : start + 1 + b % 3]
    elif op == "replace" and n:
        old = history[a % n]
        history[a % n] = type(old)(**{**old.model_dump(), "content": f"edited {serial}"})
    elif op == "renew":
        history[:] = messages_from_dict(messages_to_dict(history))
    return ""


class Side:
    """One way of serving the thread: its middleware(s), its files, what it sent."""

    def __init__(self, config: SummaryConfig, estimator: str) -> None:
        self.config, self.estimator = config, estimator
        self.backend = FsspecBackend(f"memory://ars-test-{uuid.uuid4().hex}")
        self.mw = self.middleware()
        self.sent: list[dict[str, Any]] = []

    def middleware(self) -> ArsSummarizationMiddleware:
        return ArsSummarizationMiddleware(
            self.config,
            summarizer=FakeSummarizer("SUMMARY of the earlier work"),
            estimator=self.estimator,
            backend=self.backend,
            stream=False,
        )

    def kept(self) -> tuple[Any, Any]:
        """This thread's session (``None`` before its first call) and the file backend
        its calls resolve."""
        thread, ns = scope_parts()
        return self.mw.sessions.known((thread, ns)), self.mw._resolver.resolve(None, thread, [])

    def given(self, warm: Side) -> None:
        """What the warm side archived (its files and archive log), given to a fresh
        middleware: the log is memory an engine keeps by design (a round that archives
        the same first messages again writes a continuation naming the earlier file)."""
        for path, text in files_in(warm.backend).items():
            self.backend.write_text(path, text)
        self.mw = self.middleware()
        model = FakeToolChatModel(["never"])
        session = self.mw.sessions.get(
            scope_parts(), self.mw.sessions.config_for(None), model_window(model)
        )
        _, backend = self.kept()
        learned, warm_backend = warm.kept()
        if learned is not None:
            log = learned.compressor._archives._by_backend.get(warm_backend, {})
            session.compressor._archives._by_backend[backend] = dict(log)
            # so is what the session's estimator learned from the provider's reported
            # usage (its scale and margin): a worker keeps it for the thread's later calls
            warm_est, est = learned.compressor.estimator, session.compressor.estimator
            est.scale, est.margin = warm_est.scale, warm_est.margin
            est._residuals = copy.deepcopy(warm_est._residuals)

    def call(
        self,
        messages: list[BaseMessage],
        state: dict[str, Any],
        how: str,
        system: str,
        run_async: bool,
    ) -> dict[str, Any]:
        """One call's update and answer, or the error it raised."""
        sent, usage = self.sent, how == "usage"

        def handler(request: ModelRequest[Any]) -> AIMessage:
            if how == "overflow" and len(request.messages) > OVERFLOW_ABOVE:
                sent.append({"refused": len(request.messages)})
                raise ContextOverflowError("maximum context length exceeded")
            dicts = messages_to_dict(request.messages)
            system = request.system_message.text if request.system_message else None
            sent.append({"messages": dicts, "system": system})
            meta: dict[str, Any] = {}
            if usage:  # the provider's count: a function of what it was sent
                size = len(json.dumps(dicts)) // 4
                meta["usage_metadata"] = {
                    "input_tokens": size,
                    "output_tokens": 3,
                    "total_tokens": size + 3,
                }
            return AIMessage("done", id=f"reply-{len(sent)}", **meta)

        async def ahandler(request: ModelRequest[Any]) -> AIMessage:
            return handler(request)

        request = ModelRequest(
            model=FakeToolChatModel(["never"]),
            messages=messages,
            system_message=SystemMessage(system),
            tools=[],
            state={**state, "messages": messages},
        )
        try:
            if run_async:
                result = asyncio.run(self.mw.awrap_model_call(request, ahandler))
            else:
                result = self.mw.wrap_model_call(request, handler)
        except Exception as exc:  # compared by type and message on both sides
            return {"raised": (type(exc).__name__, str(exc))}
        update = result.command.update if isinstance(result, ExtendedModelResponse) else None
        response = result.model_response if isinstance(result, ExtendedModelResponse) else result
        reply = response if isinstance(response, BaseMessage) else response.result[0]
        return {"update": update, "reply": reply}

    def cleared(self) -> None:
        cleared(self.backend)


def plain(update: dict[str, Any] | None) -> dict[str, Any] | None:
    """A state update as a checkpointer stores it, without the event's time."""
    if update is None:
        return None
    out = {k: messages_to_dict(v) if k == "messages" else v for k, v in update.items()}
    if out.get(EVENT_KEY):
        out[EVENT_KEY] = {k: v for k, v in dict(out[EVENT_KEY]).items() if k != "created_at"}
    return json.loads(json.dumps(out, default=str))


def answer(reply: BaseMessage) -> dict[str, Any]:
    """The model's answer as returned, without the known-size stamp: a call stamps its
    answer with the exact size of what it read only when it counted it, which a warm
    middleware (a running total, bounds) and a fresh one (counts) may decide apart."""
    (data,) = messages_to_dict([reply])
    ars = dict(data["data"]["response_metadata"].get("ars") or {})
    ars.pop("ars_known_size", None)
    data["data"]["response_metadata"] = {**data["data"]["response_metadata"], "ars": ars}
    return data


def persisted(state: dict[str, Any], history: list[BaseMessage], update: Any) -> None:
    """The warm side's update applied as LangGraph applies it: the event into state,
    trimmed messages replaced by id."""
    for key, value in (update or {}).items():
        if key == "messages":
            by_id = {m.id: m for m in value}
            history[:] = [by_id.get(m.id, m) for m in history]
        else:
            state[key] = value


def differential(
    steps: Sequence[Step], threshold: float, keep: int, estimator: str, run_async: bool
) -> None:
    config = adapter_config(threshold, keep)
    warm, fresh = Side(config, estimator), Side(config, estimator)
    history: list[BaseMessage] = []
    for serial in range(3):
        history.extend(Agent().turn(serial, big=serial == 1))
    state: dict[str, Any] = {}
    reply: BaseMessage | None = None
    system = SYSTEMS[0]
    token = var_child_runnable_config.set({"configurable": {"thread_id": "warm-fresh"}})
    try:
        for serial, step in enumerate(steps, start=10):
            how = apply(history, step, serial, reply)
            if how == "system":
                system = SYSTEMS[1] if system == SYSTEMS[0] else SYSTEMS[0]
            if not history:
                continue
            fresh.given(warm)
            stored = json.loads(json.dumps(state, default=str))  # as a checkpointer keeps it
            fresh_history = messages_from_dict(messages_to_dict(history))
            warm_out = warm.call(history, state, how, system, run_async)
            fresh_out = fresh.call(fresh_history, stored, how, system, run_async)
            label = (serial, step)
            assert warm.sent == fresh.sent, label
            assert warm_out.keys() == fresh_out.keys(), (label, warm_out, fresh_out)
            if "raised" in warm_out:
                assert warm_out == fresh_out, label
                w_update = None
            else:
                w_update, reply = warm_out["update"], warm_out["reply"]
                assert plain(w_update) == plain(fresh_out["update"]), label
                assert answer(reply) == answer(fresh_out["reply"]), label
            assert files_in(warm.backend) == files_in(fresh.backend), label
            fresh.cleared()
            persisted(state, history, w_update)
            if how == "usage" and "reply" in warm_out:
                history.append(reply)  # a reply reporting the provider's count joins the history
    finally:
        var_child_runnable_config.reset(token)
        warm.cleared()
        fresh.cleared()


@adapter_hunt(OPS)
def test_a_warm_middleware_matches_a_fresh_one(
    steps: list[Step], threshold: float, keep: int, estimator: str, run_async: bool
) -> None:
    """At every call, the warm middleware and a fresh one given the checkpointed thread
    send the same request, ask for the same update and write the same files."""
    differential(steps, threshold, keep, estimator, run_async)
