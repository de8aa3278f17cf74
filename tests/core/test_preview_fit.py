"""Previews are fitted on the token offsets of one encoding pass (R12, R13).

An offloaded result's preview (its head, or head and tail) must fit its token
budget and be about as long as fits. With an exact BPE estimator the text is
encoded once (and its end once) and the preview is cut on those token offsets,
confirmed by a count; the oracles are the exact count of what is sent, the
longest preview a search by counts finds, and how many times the encoder runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from ars_core import preview_fit
from ars_core._tiktoken_offline import token_ends
from ars_core.estimate import TiktokenEstimator
from ars_core.l1 import fit_head_and_tail, fit_preview

FRAME = (
    "[ARS: tool result offloaded: 123456 characters (~30000 tokens) saved to "
    "outputs/large_tool_results/bash-0123abcd.txt. Read that file for the full output.]"
    "\nPreview:\n"
)


def _log(lines: int) -> str:
    return "".join(
        f"tests/test_mod{i % 17}.py::test_case_{i} {'PASSED' if i % 5 else 'FAILED'} "
        f"[{i * 100 // lines:3d}%]\n"
        for i in range(lines)
    )


TEXTS = {
    "log": _log(600),
    "cjk": "日本語のテキストです。処理が完了しました。" * 300,
    "accents": "éèà çù, naïve café résumé; " * 400,
    "surrogates": "a\ud800b \udfff c " * 900,
    "emoji": "status ✅ done 🚀 next ⏳ " * 400,
    "spaces": " " * 6000 + "end of the padding\n" + "x = 1\n" * 500,
    "one char": "=" * 20000,
    "json": '{"key": [1, 2, 3], "value": "text", "nested": {"a": null}}\n' * 300,
}


class _Counted:
    """The exact estimator, counting its encoder passes (and the characters read)."""

    def __init__(self) -> None:
        self.inner = TiktokenEstimator()
        self.passes = 0
        self.chars = 0
        self.name = "counted"

    def count_text(self, text: str) -> int:
        self.passes += 1
        self.chars += len(text)
        return self.inner.count_text(text)

    def count(self, messages: Any, **kwargs: Any) -> int:
        raise NotImplementedError


class _WithOffsets(_Counted):
    """:class:`_Counted` naming the encoding its counts are (``TiktokenEncoding``):
    previews are fitted on where its tokens end, each pass counted here."""

    encoding_name = "o200k_base"

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()

        def ends(name: str, text: str) -> list[int]:
            self.passes += 1
            self.chars += len(text)
            return token_ends(name, text)

        monkeypatch.setattr(preview_fit, "token_ends", ends)


@pytest.mark.spec("R12", "R13")
@pytest.mark.parametrize("name", list(TEXTS))
@pytest.mark.parametrize("budget", [56, 120, 300, 700])
def test_a_preview_fits_its_budget_and_is_about_as_long_as_fits(
    name: str, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, overhead = TEXTS[name], 9
    exact = TiktokenEstimator()
    room = budget - overhead
    fast, search = _WithOffsets(monkeypatch), _Counted()
    for fit in (fit_preview, fit_head_and_tail):
        got = fit(fast, text, budget, FRAME, overhead=overhead)
        best = fit(search, text, budget, FRAME, overhead=overhead)  # a search by counts
        assert exact.count_text(FRAME + got) <= room and got
        # as long as the search finds, to within a few tokens (the seams of the cut)
        assert len(got) >= len(best) - 6 * max(1, len(best) // max(1, room)), (fit, got, best)
        if fit is fit_head_and_tail and "characters not shown" in got:
            head, _, rest = got.partition("\n[... ")
            shown = len(text) - int(rest.split(" ", 1)[0])
            tail = rest.split("characters not shown ...]\n", 1)[1]
            assert text.startswith(head) and (not tail or text.endswith(tail))
            assert len(head) + len(tail) == shown and len(head) == shown * 2 // 3


@pytest.mark.spec("R12", "R13")
@pytest.mark.parametrize("name", ["log", "json", "accents"])
def test_a_preview_is_fitted_on_one_encoding_pass_not_a_count_per_trial(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The text is encoded once for its head and once for its end, and what is sent
    is confirmed by a count or two: a handful of encoder passes over a few times the
    preview's size, where a search by counts encodes a trial length per step."""
    text = TEXTS[name] * 4
    fast, search = _WithOffsets(monkeypatch), _Counted()
    got = fit_head_and_tail(fast, text, 300, FRAME, overhead=9)
    best = fit_head_and_tail(search, text, 300, FRAME, overhead=9)
    assert len(got) >= len(best) - 24
    assert fast.passes <= 7 < search.passes
    assert fast.chars <= 10 * len(got) and fast.chars < search.chars / 2


@pytest.mark.spec("R13")
@pytest.mark.parametrize("name", list(TEXTS))
def test_token_ends_are_where_each_token_of_one_encoding_pass_ends(name: str) -> None:
    """``token_ends`` gives, for each token of the text, the characters the tokens up
    to it decode to (a character split between two tokens belongs to the first)."""
    estimator = TiktokenEstimator()
    text = TEXTS[name][:3000]
    ends = token_ends("o200k_base", text)
    assert len(ends) == estimator.count_text(text) and ends[-1] == len(text)
    encoding = estimator._encoding
    tokens = encoding.encode_ordinary(text)
    for i in range(0, len(tokens), 7):
        decoded = encoding.decode_bytes(tokens[: i + 1]).decode("utf-8", "replace")
        assert ends[i] == len(decoded), i


@pytest.mark.spec("R12", "R57")
@pytest.mark.parametrize("seed", ["a", "b", "c", "d"])
def test_an_offloaded_result_keeps_the_count_of_what_it_became(seed: str) -> None:
    """L1 keeps the count its preview fit made of an offloaded result's new body: the
    count the message then holds is the one a fresh count of it gives (texts of
    every kind, with a name and a call id, a head-and-tail preview and a head one)."""
    from ars_core import ContentPart, Message
    from ars_core.l1 import plan_l1

    est = TiktokenEstimator()
    texts = [
        ("x = 1\n" + "résumé 表情 🙂 value=" * 400 + f"\nError {seed}\n") * 3,
        f"{seed} " + "token " * 3000,
        "".join(f"line {i}: {seed * (i % 7)}\n" for i in range(900)),
    ]
    history = [Message(role="user", content="go")]
    for i, text in enumerate(texts):
        history.append(Message(role="tool", content=text, name=f"t{i}", tool_call_id=f"c{i}"))
    plan = plan_l1(history, estimator=est, tool_token_limit=300)
    assert set(plan.replaced) == {1, 2, 3}
    for i in plan.replaced:
        new = plan.view[i]
        assert est.count_message(new) == est.measure(new)
        assert est.count_message(new) <= 300
    part = Message(role="tool", content=(ContentPart(type="text", text=texts[0]),), name="p")
    parted = plan_l1([part], estimator=est, tool_token_limit=300).view[0]
    assert est.count_message(parted) == est.measure(parted)
