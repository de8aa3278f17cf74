"""J. Content blocks counted by content: one conversation, three formats; images by size.

The largest runs, recorded in OpenAI form, rewritten as Anthropic content blocks
(the user's text as a ``text`` block, an assistant's text beside its calls as a
``thinking`` block, its calls as ``tool_use`` blocks, the results as
``tool_result`` blocks of one user message) and as LangChain v1 messages
(``reasoning`` and ``tool_call`` blocks beside ``tool_calls``, converted by
``ars_langchain``), each estimated with both default estimators. Then what ARS
charges for images, against the worked examples the providers publish.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Sequence
from typing import Any

from ars_core import ApproxEstimator, Message, TiktokenEstimator, from_openai
from ars_core.replay import Run

from .common import Context, table, target

KEY = "J"
NEEDS: tuple[str, ...] = ()
#: how far apart the formats' estimates may be (issue target)
FORMAT_TOLERANCE = 0.05


# ================================================================== the three formats


def anthropic_form(messages: Sequence[Message]) -> list[Message]:
    """``messages`` as Anthropic content blocks (consecutive tool results in one user turn)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.text}
            if out and out[-1]["role"] == "user" and out[-1].get("results"):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "results": True})
        elif m.role == "assistant" and m.tool_calls:
            blocks: list[dict[str, Any]] = []
            if m.text:
                blocks.append({"type": "thinking", "thinking": m.text, "signature": "EqQBCkYI"})
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.args)}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": [{"type": "text", "text": m.text}]})
    return [from_openai({k: v for k, v in d.items() if k != "results"}) for d in out]


def langchain_v1_form(messages: Sequence[Message]) -> list[Message]:
    """``messages`` as LangChain v1 messages, back through ``ars_langchain``'s converter."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from ars_langchain import HistoryConverter

    lc: list[Any] = []
    for m in messages:
        if m.role == "system":
            lc.append(SystemMessage(m.text))
        elif m.role == "user":
            lc.append(HumanMessage(m.text))
        elif m.role == "tool":
            lc.append(ToolMessage(m.text, tool_call_id=m.tool_call_id or "", name=m.name))
        else:
            calls = [
                {"type": "tool_call", "id": c.id, "name": c.name, "args": dict(c.args)}
                for c in m.tool_calls
            ]
            kind = "reasoning" if calls else "text"
            blocks = [{"type": kind, kind: m.text}] if m.text else []
            lc.append(AIMessage(content=[*blocks, *calls], tool_calls=calls, output_version="v1"))
    return list(HistoryConverter().convert(lc))


def _format_rows(runs: Sequence[Run]) -> list[dict[str, Any]]:
    rows = []
    for name, make in (("approx", ApproxEstimator), ("o200k", TiktokenEstimator)):
        worst = {"Anthropic blocks": 0.0, "LangChain v1 blocks": 0.0}
        totals = dict.fromkeys(["OpenAI", *worst], 0)
        for run in runs:
            forms = {
                "OpenAI": list(run.messages),
                "Anthropic blocks": anthropic_form(run.messages),
                "LangChain v1 blocks": langchain_v1_form(run.messages),
            }
            counts = {k: make().count(v) for k, v in forms.items()}
            for k in worst:
                worst[k] = max(worst[k], abs(counts[k] / counts["OpenAI"] - 1))
            for k, v in counts.items():
                totals[k] += v
        rows.append({"estimator": name, "totals": totals, "worst": worst})
    return rows


# ================================================================== images


def png(width: int, height: int) -> str:
    """A PNG header (signature + IHDR) as base64: what ARS reads the size from."""
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    body = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr
    return base64.b64encode(body + struct.pack(">I", zlib.crc32(ihdr)) + b"\0" * 64).decode()


#: the providers' published worked examples: (provider, width, height, detail, tokens)
DOCUMENTED = (
    ("OpenAI", 1024, 1024, "high", 765),
    ("OpenAI", 2048, 4096, "high", 1105),
    ("OpenAI", 4096, 8192, "low", 85),
    ("Anthropic", 200, 200, "", 54),
    ("Anthropic", 1000, 1000, "", 1334),
    ("Anthropic", 1092, 1092, "", 1590),
)


def _image_block(provider: str, width: int, height: int, detail: str) -> dict[str, Any]:
    if provider == "OpenAI":
        url = {"url": f"data:image/png;base64,{png(width, height)}", "detail": detail}
        return {"type": "image_url", "image_url": url}
    source = {"type": "base64", "media_type": "image/png", "data": png(width, height)}
    return {"type": "image", "source": source}


def _image_rows() -> list[dict[str, Any]]:
    est = ApproxEstimator()
    rows = []
    for provider, width, height, detail, documented in DOCUMENTED:
        msg = from_openai(
            {"role": "user", "content": [_image_block(provider, width, height, detail)]}
        )
        part = msg.content[0]
        assert not isinstance(part, str)
        charged = est.count_part(part.type, part.text, part.data)
        rows.append(
            {
                "provider": provider,
                "size": f"{width}x{height}",
                "detail": detail or "-",
                "documented": documented,
                "charged": charged,
            }
        )
    return rows


# ================================================================== the section


def measure(ctx: Context) -> dict[str, Any]:
    runs = ctx.runs_by_size[: ctx.args.token_runs]
    rows = _format_rows(runs)
    for r in rows:
        ctx.log(
            f"  {r['estimator']}: worst "
            + ", ".join(f"{k} {100 * v:.2f}%" for k, v in r["worst"].items())
        )
    return {"runs": len(runs), "formats": rows, "images": _image_rows()}


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## J. Content blocks: one conversation, three formats", ""]
    lines.append(
        f"The {data['runs']} largest runs (OpenAI form, as recorded) rewritten as Anthropic "
        "content blocks (`text`; an assistant's text beside its calls as `thinking`; "
        "`tool_use`; the results as `tool_result` blocks of one user turn) and as LangChain v1 "
        "messages (`reasoning` and `tool_call` blocks beside `tool_calls`, through "
        "`ars_langchain`'s converter), each run estimated whole. Difference: the worst run's "
        "|format - OpenAI| / OpenAI."
    )
    lines.append("")
    rows = []
    for r in data["formats"]:
        base = r["totals"]["OpenAI"]
        for fmt, total in r["totals"].items():
            worst = r["worst"].get(fmt)
            rows.append(
                [
                    r["estimator"],
                    fmt,
                    f"{total:,}",
                    f"{100 * (total / base - 1):+.2f}%",
                    "-" if worst is None else f"{100 * worst:.2f}%",
                ]
            )
    lines += table(
        ["estimator", "format", "tokens (all runs)", "vs OpenAI", "worst run"], rows, "llrrr"
    )
    worst = max(v for r in data["formats"] for v in r["worst"].values())
    lines += [
        "",
        target(
            "the same conversation in OpenAI, Anthropic and LangChain v1 formats within "
            f"{100 * FORMAT_TOLERANCE:.0f}% of each other (worst run {100 * worst:.2f}%)",
            worst <= FORMAT_TOLERANCE,
        ),
        "",
        "Images: what ARS charges for an image block (its size read from the PNG header), "
        "against the worked examples in OpenAI's and Anthropic's vision documentation.",
        "",
    ]
    images = data["images"]
    lines += table(
        ["provider", "size", "detail", "documented", "ARS charges"],
        [
            [r["provider"], r["size"], r["detail"], f"{r['documented']:,}", f"{r['charged']:,}"]
            for r in images
        ],
        "lllrr",
    )
    off = max(abs(r["charged"] / r["documented"] - 1) for r in images)
    lines += [
        "",
        target(
            "images charged by size and detail as the providers document (largest "
            f"difference {100 * off:.1f}%, within 1%)",
            off <= 0.01,
        ),
        "",
    ]
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {"formats": data["formats"], "images": data["images"]}
