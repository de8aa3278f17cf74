"""The text a provider counts in what is not plain message text: tool-call
arguments and tool schemas as JSON, and the text that content blocks carry
(thinking, reasoning, documents). Iterative, so no input makes it recurse."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["block_text", "json_text", "tool_text", "tools_snapshot"]


class _Lit(str):
    """Literal JSON punctuation pushed on :func:`_walk_text`'s stack."""


def _scalar_text(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:  # an object whose str() fails still counts as its type name
        text = type(value).__name__
    return json.dumps(text, ensure_ascii=False)


def _walk_text(value: Any) -> str:
    """JSON-like text of any value, without recursion: cycles, non-string keys
    and nesting deeper than the interpreter's recursion limit are all fine."""
    out: list[str] = []
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, _Lit):
            out.append(item)
        elif isinstance(item, Mapping | list | tuple | set | frozenset):
            if id(item) in seen:
                out.append('"[cycle]"')
                continue
            seen.add(id(item))
            if isinstance(item, Mapping):
                out.append("{")
                stack.append(_Lit("}"))
                for k, v in reversed(list(item.items())):
                    stack += [_Lit(", "), v, _Lit(_scalar_text(k) + ": ")]
            else:
                out.append("[")
                stack.append(_Lit("]"))
                for v in reversed(list(item)):
                    stack += [_Lit(", "), v]
        else:
            out.append(_scalar_text(item))
    return "".join(out)


def json_text(value: Any) -> str:
    """The JSON text a provider would see for ``value`` (tool arguments, a block).

    Anything ``json.dumps`` refuses — keys that are not strings, cycles, nesting
    deeper than the recursion limit, objects whose ``str()`` fails — falls back to
    an iterative walk that renders it alike. Never raises.
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return _walk_text(value)
    except Exception:  # a default=str that raised inside a custom object
        return _walk_text(value)


def block_text(kind: str, data: Mapping[str, Any]) -> str | None:
    """The text a content block carries, counted like message text: thinking
    (Anthropic ``thinking`` / ``redacted_thinking``, LangChain v1 ``reasoning``,
    OpenAI reasoning summaries), plain-text documents, and any block with a
    ``text`` field. ``None`` when the block holds no text (an audio clip)."""
    pieces: list[str] = []
    if kind == "thinking":
        pieces.append(str(data.get("thinking") or ""))
    elif kind == "redacted_thinking":
        pieces.append(str(data.get("data") or ""))
    elif kind == "reasoning":
        reasoning = data.get("reasoning")
        if isinstance(reasoning, str):
            pieces.append(reasoning)
        summary = data.get("summary")
        if isinstance(summary, list):
            pieces += [str(s.get("text", "")) for s in summary if isinstance(s, Mapping)]
    elif kind == "non_standard":
        pieces.append(json_text(data.get("value")))
    elif kind == "document":
        source = data.get("source")
        if isinstance(source, Mapping) and source.get("type") == "text":
            pieces.append(str(source.get("data") or ""))
    if not pieces:
        for key in ("text", "refusal"):
            value = data.get(key)
            if isinstance(value, str):
                pieces.append(value)
    return "\n".join(pieces) if pieces else None


def tool_text(tool: Any) -> str:
    """The text of a tool schema as handed to a model."""
    if isinstance(tool, str):
        return tool
    if isinstance(tool, Mapping):
        return json_text(tool)
    return str(tool)


def tools_snapshot(tools: Iterable[Any]) -> list[Any]:
    """``tools`` as a count of them is remembered with: each schema mapping copied
    whole, so one edited in place afterwards (a description rewritten) no longer
    compares equal to its copy and is counted again; anything else as it is."""
    out = []
    for tool in tools:
        if isinstance(tool, Mapping):
            try:
                tool = copy.deepcopy(tool)
            except Exception:  # a schema that cannot be copied: compared as it is
                pass
        out.append(tool)
    return out
