"""The five Context fields, their defaults, metadata and validation."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import attrs
import pytest

from ars_core import DEFAULT_SUMMARY_PROMPT, ConfigError, SummaryConfig
from ars_core.config import CONFIG_FIELDS

pytestmark = pytest.mark.spec("R35")


class TestDefaults:
    @pytest.mark.spec("R35")
    def test_defaults_are_the_seeds(self) -> None:
        c = SummaryConfig()
        assert (
            c.summary_threshold,
            c.summary_keep_messages,
            c.summary_tool_result_token_limit,
            c.summary_l2_trigger_ratio,
        ) == (None, 10, 300, 0.4)
        # unset: the adapters follow the model's window when they know it, else the seed's 100K
        assert c.threshold_tokens == 102_400 and c.l2_threshold_tokens == 40_960
        assert "{messages}" in c.summary_prompt and c.summary_prompt == DEFAULT_SUMMARY_PROMPT
        assert DEFAULT_SUMMARY_PROMPT.startswith("You compress the context of a long conversation.")

    @pytest.mark.spec("R35")
    def test_fields_are_marked_admin_only(self) -> None:
        for f in attrs.fields(SummaryConfig):
            assert f.metadata["admin_only"] is True and f.metadata["description"]
        assert CONFIG_FIELDS == (
            "summary_threshold",
            "summary_keep_messages",
            "summary_prompt",
            "summary_tool_result_token_limit",
            "summary_l2_trigger_ratio",
            "summary_max_tokens",
            "summary_timeout",
            "summary_max_retries",
            "summary_retry_delay",
            "summary_overflow_retries",
        )

    @pytest.mark.spec("R35")
    def test_from_context_object_and_mapping(self) -> None:
        ctx = SimpleNamespace(summary_threshold=8, summary_keep_messages=None, user_id="u1")
        assert SummaryConfig.from_context(ctx) == SummaryConfig(summary_threshold=8)
        assert (
            SummaryConfig.from_context({"summary_l2_trigger_ratio": 0.5}).summary_l2_trigger_ratio
            == 0.5
        )


class TestValidation:
    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("summary_threshold", 0),
            ("summary_threshold", -1),
            ("summary_threshold", "100"),
            ("summary_keep_messages", 0),
            ("summary_keep_messages", 2.5),
            ("summary_tool_result_token_limit", -300),
            ("summary_tool_result_token_limit", True),
            ("summary_l2_trigger_ratio", 0),
            ("summary_l2_trigger_ratio", 1.5),
            ("summary_prompt", "Summarize this."),
            ("summary_prompt", None),
        ],
    )
    @pytest.mark.spec("R35")
    def test_invalid_values_raise_a_clear_error(self, field: str, value: object) -> None:
        with pytest.raises(ConfigError) as info:
            SummaryConfig(**{field: value})
        assert info.value.field == field
        assert field in str(info.value)

    @pytest.mark.spec("R35")
    def test_ratio_outside_recommended_range_warns(self) -> None:
        with pytest.warns(UserWarning, match="recommended range 0.1-1.0"):
            SummaryConfig(summary_l2_trigger_ratio=0.05)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            SummaryConfig(summary_l2_trigger_ratio=1.0)

    def test_config_error_is_a_value_error(self) -> None:
        with pytest.raises(ValueError):
            SummaryConfig(summary_keep_messages=-1)


class TestThresholdFollowsTheModel:
    @pytest.mark.spec("R35")
    def test_unset_threshold_is_85_percent_of_the_window(self) -> None:
        """No ``summary_threshold``: T = floor(0.85 x window) exactly; the source is named."""
        c = SummaryConfig(summary_keep_messages=3)
        followed = c.following_model(200_000)
        assert followed.threshold_tokens == 170_000
        assert followed.summary_keep_messages == 3
        assert SummaryConfig().following_model(1_001).threshold_tokens == 850
        assert c.threshold_source(200_000) == "85% of the model's 200,000-token input window"

    @pytest.mark.spec("R35")
    def test_configured_threshold_and_unknown_windows_keep_the_config(self) -> None:
        """A set ``summary_threshold`` wins; no window, a bool or a non-positive
        window leave the config (and its 100K default) as it is."""
        configured = SummaryConfig(summary_threshold=8)
        assert configured.following_model(200_000) is configured
        assert configured.threshold_source(200_000) is None
        unset = SummaryConfig()
        for window in (None, 0, -5, True):
            assert unset.following_model(window) is unset  # type: ignore[arg-type]
            assert unset.threshold_source(window) is None  # type: ignore[arg-type]
        assert unset.threshold_tokens == 102_400
