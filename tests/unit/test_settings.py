"""Strict, declarative serving settings (handlers/settings.py): a wrong type or an unknown key fails
the load naming the key; TorchServe's own handler keys pass; one source of defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from handlers.digits.settings import DigitsSettings
from handlers.errors import ArchiveError
from handlers.frequency.settings import FrequencySettings
from handlers.sentiment.settings import SentimentSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("serving", [SentimentSettings, FrequencySettings])
def test_values_of_the_wrong_type_are_refused_naming_the_key(serving):
    """Guard: `**serve` passed seed and fp16_atol through unchecked; "abc" became the seed."""
    with pytest.raises(ArchiveError, match=r"handler\.seed") as e:
        serving.parse({"seed": "abc", "fp16_atol": "wide"}, "m")
    if serving is SentimentSettings:
        assert "handler.fp16_atol" in str(e.value)


@pytest.mark.parametrize("value", [True, 1.5, "3", -1])
def test_integers_are_integers(value):
    with pytest.raises(ArchiveError, match="handler.mc_samples"):
        FrequencySettings.parse({"mc_samples": value}, "frequency")


@pytest.mark.parametrize("serving", [SentimentSettings, FrequencySettings, DigitsSettings])
def test_torchserves_own_profile_key_is_tolerated(serving):
    """Guard: TorchServe's `handler: {profile: true}` (ts/handler_utils/timer.py) was rejected as
    an unknown setting."""
    assert serving.parse({"profile": True}, "m").profile is True


def test_sentiment_defaults_are_the_model_configs_limits():
    """One source of defaults: the model-config restates the limits SentimentSettings has."""
    config = yaml.safe_load((ROOT / "handlers/sentiment/model-config.yaml").read_text())["handler"]
    defaults = SentimentSettings()
    for key in ("max_texts", "max_batch_tokens", "max_text_bytes", "mc_samples", "seed"):
        assert config[key] == getattr(defaults, key), key


@pytest.mark.parametrize("serving", [SentimentSettings, FrequencySettings, DigitsSettings])
def test_every_setting_is_documented(serving):
    for name, field in serving.model_fields.items():
        assert field.description, f"{serving.__name__}.{name} has no docstring"


def test_digits_settings_are_strict_too():
    with pytest.raises(ArchiveError, match=r"handler\.max_images.*handler\.runtime|unknown"):
        DigitsSettings.parse({"max_images": "64", "runtime": "tensorrt", "max_imgs": 3}, "digits")


SHARED = ("runtime", "threads", "share_cores", "intra_op_spinning", "mc_samples", "seed")


@pytest.mark.parametrize("settings", [SentimentSettings, FrequencySettings, DigitsSettings])
def test_the_knobs_every_model_has_are_declared_once_in_the_base(settings):
    """Guard: runtime, threads, mc_samples and seed were declared in all three settings classes
    (and threads copied into a second object per model). A model may narrow a shared knob's
    range or default (frequency's mc_samples >= 2, sentiment's runtime auto), never add it anew."""
    from handlers.settings import ServingSettings

    assert set(SHARED) <= set(ServingSettings.model_fields)
    own = {"sentiment": {"runtime"}, "frequency": {"mc_samples"}, "digits": set()}
    model = settings.__module__.split(".")[1]
    redeclared = {k for k in SHARED if k in settings.__dict__.get("__annotations__", {})}
    assert redeclared == own[model]


def manifests() -> dict[str, dict]:
    from handlers.kits.text.settings import TextExport
    from tests.unit.test_digits_codec import MANIFEST as DIGITS
    from tests.unit.test_frequency_codec import EXPORT as FREQUENCY

    sentiment = TextExport(("ids", "mask"), ("logits", "features"), ("neg", "pos"), 16)
    return {
        "sentiment": {"handler": sentiment.to_block(), "version": "v1"},
        "frequency": {"handler": FREQUENCY, "version": "v1"},
        "digits": DIGITS | {"version": "v1"},
    }


@pytest.mark.parametrize("model", ["sentiment", "frequency", "digits"])
def test_a_models_settings_are_one_object_read_one_way(model):
    """Guard: digits and frequency kept the knobs in a pydantic block and copies of some in a
    dataclass beside it, read as `settings.threads` and `settings.serving.share_cores`."""
    import importlib

    from handlers.settings import ServingSettings

    parse = importlib.import_module(f"handlers.{model}.settings").parse_settings
    settings = parse(manifests()[model], {"threads": 2, "share_cores": True, "seed": 3})
    assert isinstance(settings, ServingSettings)
    assert (settings.threads, settings.share_cores, settings.seed) == (2, True, 3)
    assert settings.version and settings.export is not None
    assert not hasattr(settings, "serving")
