"""Fit ApproxEstimator's weights against tiktoken o200k_base (least squares).

Run: python benchmarks/fit_approx.py [TRAJECTORY_DIR]
Prints the weights to paste into ars_core/estimate.py and the error per sample kind.
"""

from __future__ import annotations

import inspect
import json
import json.decoder
import sys
import textwrap
from pathlib import Path

import numpy as np

from ars_core import estimate as E
from ars_core.messages import read_messages

ROOT = Path(__file__).resolve().parents[1]


def features(text: str) -> list[float]:
    return [
        len(E._WORD.findall(text)),
        len(E._LONG_WORD_EXTRA.findall(text)),
        len(E._DIGITS.findall(text)),
        len(E._PUNCT_RUN.findall(text)),
        len(E._PUNCT.findall(text)),
        len(E._NEWLINES.findall(text)),
        len(E._INDENT.findall(text)),
        len(E._CJK.findall(text)),
        len(E._CJK_PUNCT.findall(text)),
        len(E._OTHER.findall(text)),
    ]


def samples(traj_dir: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"english": [], "chinese": [], "code": [], "json": [], "tool": []}
    for path in sorted(traj_dir.glob("*.jsonl.gz"))[:40]:
        msgs = read_messages(path)
        for m in msgs:
            if m.role == "tool":
                out["tool"].append(m.text[:20000])
            elif m.role == "assistant":
                out["english"].append(m.text)
                out["json"].append(json.dumps([dict(c.args) for c in m.tool_calls]))
        out["json"].append(
            json.dumps(
                [E.__dict__.get("x", {}), [m.text[:500] for m in msgs[:20]]], ensure_ascii=False
            )
        )
    for name in ("chinese.txt", "chinese_prose.txt"):
        text = (ROOT / "tests/data" / name).read_text(encoding="utf-8")
        out["chinese"].extend(p for p in text.split("\n") if p.strip())
    for mod in (json.decoder, textwrap, inspect):
        src = inspect.getsource(mod)
        out["code"].extend(src[i : i + 3000] for i in range(0, len(src), 3000))
    return out


def main() -> None:
    from ars_core._tiktoken_offline import load_encoding

    enc = load_encoding("o200k_base")
    traj = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared/data/trajectories"
    data = samples(traj)
    X, y, w = [], [], []
    for texts in data.values():
        weight = 1.0 / max(1, sum(len(t) for t in texts))
        for t in texts:
            if not t:
                continue
            X.append(features(t))
            y.append(len(enc.encode_ordinary(t)))
            w.append(weight * 1e6)
    Xa, ya, wa = np.array(X, float), np.array(y, float), np.sqrt(np.array(w))
    coef, *_ = np.linalg.lstsq(Xa * wa[:, None], ya * wa, rcond=None)
    names = [
        "WORD",
        "LONG",
        "DIGITS",
        "PUNCT_RUN",
        "PUNCT",
        "NEWLINE",
        "INDENT",
        "CJK",
        "CJK_PUNCT",
        "OTHER",
    ]
    for n, c in zip(names, coef, strict=False):
        print(f"    W_{n} = {c:.3f}")
    for kind, texts in data.items():
        est = sum(float(np.dot(features(t), coef)) for t in texts)
        true = sum(len(enc.encode_ordinary(t)) for t in texts)
        print(f"{kind:8s} true={true:9d} est={est:11.0f} err={(est - true) / true:+.3f}")


if __name__ == "__main__":
    main()
