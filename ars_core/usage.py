"""Token usage of a summary call, and the retries it took.

:class:`Usage` is what a provider reported for one model call (or what ARS
estimated). A summary call that had to be retried lists each retry in
``retries`` (:class:`SummaryRetry`): why (``"context_overflow"``: the
summary model's window was too small, the input was halved;
``"transient_error"``: a rate limit, a server or connection error, retried
after a delay), the error, and the size of the input or the wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = ["RetryReason", "SummaryResult", "SummaryRetry", "Usage"]

RetryReason = Literal["context_overflow", "transient_error"]


@attrs.frozen
class SummaryRetry:
    """One retry of a summary call.

    ``reason`` is ``"context_overflow"`` (the input was too large for the
    summary model: ``input_tokens`` is the size of the input that overflowed,
    ``retry_input_tokens`` the size of the halved input sent next) or
    ``"transient_error"`` (rate limit, server or connection error, timeout
    reported by the provider: ``delay`` is the seconds waited before the next
    attempt). ``error`` is the error as ``"TypeName: message"``.
    """

    reason: RetryReason
    error: str
    input_tokens: int | None = None
    retry_input_tokens: int | None = None
    delay: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: fields that are ``None`` are left out."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummaryRetry:
        reason = str(data["reason"])
        if reason not in ("context_overflow", "transient_error"):
            raise ValueError(f"unknown retry reason {reason!r}")
        delay = data.get("delay")
        return cls(
            reason=reason,  # type: ignore[arg-type]
            error=str(data.get("error", "")),
            input_tokens=_opt_int(data.get("input_tokens")),
            retry_input_tokens=_opt_int(data.get("retry_input_tokens")),
            delay=None if delay is None else float(delay),
        )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


@attrs.frozen
class Usage:
    """Token usage of one model call, as the provider reported it (or estimated).

    For a summary call, ``retries`` lists the retries it took (see
    :class:`SummaryRetry`); the token figures are the successful attempt's."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = attrs.field()
    retries: tuple[SummaryRetry, ...] = ()

    @total_tokens.default
    def _total(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        """``{"input_tokens", "output_tokens", "total_tokens"}``, and
        ``"retries"`` (a list of :meth:`SummaryRetry.to_dict`) when there were any."""
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.retries:
            out["retries"] = [r.to_dict() for r in self.retries]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            input_tokens=int(data.get("input_tokens", 0)),
            output_tokens=int(data.get("output_tokens", 0)),
            total_tokens=int(data.get("total_tokens", 0)),
            retries=tuple(SummaryRetry.from_dict(r) for r in data.get("retries") or ()),
        )


@attrs.frozen
class SummaryResult:
    """What a summarizer returns: the text, the call's usage, and the model used."""

    text: str
    usage: Usage | None = None
    model: str | None = None
