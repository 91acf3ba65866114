"""Strict, declarative serving settings (handlers/settings.py): a wrong type or an unknown key fails
the load naming the key; TorchServe's own handler keys pass; one source of defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from handlers.digits.settings import DigitsServing
from handlers.errors import ArchiveError
from handlers.frequency.settings import FrequencyServing
from handlers.sentiment.settings import SentimentServing

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("serving", [SentimentServing, FrequencyServing])
def test_values_of_the_wrong_type_are_refused_naming_the_key(serving):
    """Guard: `**serve` passed seed and fp16_atol through unchecked; "abc" became the seed."""
    with pytest.raises(ArchiveError, match=r"handler\.seed") as e:
        serving.parse({"seed": "abc", "fp16_atol": "wide"}, "m")
    if serving is SentimentServing:
        assert "handler.fp16_atol" in str(e.value)


@pytest.mark.parametrize("value", [True, 1.5, "3", -1])
def test_integers_are_integers(value):
    with pytest.raises(ArchiveError, match="handler.mc_samples"):
        FrequencyServing.parse({"mc_samples": value}, "frequency")


@pytest.mark.parametrize("serving", [SentimentServing, FrequencyServing, DigitsServing])
def test_torchserves_own_profile_key_is_tolerated(serving):
    """Guard: TorchServe's `handler: {profile: true}` (ts/handler_utils/timer.py) was rejected as
    an unknown setting."""
    assert serving.parse({"profile": True}, "m").profile is True


def test_sentiment_defaults_are_the_model_configs_limits():
    """One source of defaults: the model-config restates the limits SentimentServing has."""
    config = yaml.safe_load((ROOT / "handlers/sentiment/model-config.yaml").read_text())["handler"]
    defaults = SentimentServing()
    for key in ("max_texts", "max_batch_tokens", "max_text_bytes", "mc_samples", "seed"):
        assert config[key] == getattr(defaults, key), key


@pytest.mark.parametrize("serving", [SentimentServing, FrequencyServing, DigitsServing])
def test_every_setting_is_documented(serving):
    for name, field in serving.model_fields.items():
        assert field.description, f"{serving.__name__}.{name} has no docstring"


def test_digits_settings_are_strict_too():
    with pytest.raises(ArchiveError, match=r"handler\.max_images.*handler\.runtime|unknown"):
        DigitsServing.parse({"max_images": "64", "runtime": "tensorrt", "max_imgs": 3}, "digits")
